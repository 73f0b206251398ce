"""Driving a monitored run: start the monitor process, run the pipeline or the program, tell the
monitor how it ended.

In: a pipeline (or a program using the drop-in queues) and queries. Out: a ``RunResult``, and the
run file the monitor process wrote.

The names below are imported when first used (PEP 562): a module of this package (the options
the command line builds before it starts a program) is imported without the session's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

if TYPE_CHECKING:
    from streamscope.runtime.options import RunOptions, RunResult
    from streamscope.runtime.session import run

__all__ = ["RunOptions", "RunResult", "run"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "RunOptions": "streamscope.runtime.options:RunOptions",
        "RunResult": "streamscope.runtime.options:RunResult",
        "run": "streamscope.runtime.session:run",
    },
)
