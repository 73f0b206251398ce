"""Settings for the whole suite.

Hypothesis: no per-example deadline and no "too slow" health check. These tests hold
properties, not speeds (the benchmarks measure those), and the suite must pass on a shared
machine whose other core is busy, where one example can take several times its usual time.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "streamscope", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("streamscope")
