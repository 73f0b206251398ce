"""Settings for the whole suite.

Hypothesis: no per-example deadline and no "too slow" health check. These tests hold
properties, not speeds (the benchmarks measure those), and the suite must pass on a shared
machine whose other core is busy, where one example can take several times its usual time.

SIGINT: the tests that press Ctrl-C on a run expect it to act as at a terminal. Started as a
background job, the suite inherits SIGINT ignored, and so would every program it starts (an
ignored signal stays ignored across exec; a handled one is reset): it is handled here again.
"""

from __future__ import annotations

import signal

from hypothesis import HealthCheck, settings

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile(
    "streamscope", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("streamscope")
