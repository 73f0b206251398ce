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


#: Files whose tests run one after another on one worker (``--dist loadfile`` otherwise gives
#: each file to whichever worker is free): the what-if tests hold predictions to reruns and so
#: need the machine's other load steady through each run (a busy core is; a neighbour's
#: CPU-bound programs starting and stopping are not, and the model then refuses itself, as it
#: should), and the tests of where a stage's time goes run CPU-bound programs back to back.
TOGETHER = frozenset({
    "tests/integration/test_whatif.py",
    "tests/integration/test_where_time_goes.py",
    "tests/integration/test_readme.py",
})  # fmt: skip


def pytest_xdist_make_scheduler(config: object, log: object) -> object | None:
    """``--dist loadfile``, with the files of ``TOGETHER`` one unit of work."""
    if getattr(getattr(config, "option", None), "dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Together(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            scope = nodeid.split("::", 1)[0]
            return "together" if scope in TOGETHER else scope

    return Together(config, log)  # type: ignore[arg-type]
