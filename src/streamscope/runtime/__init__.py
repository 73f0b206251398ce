"""Driving a monitored run: start the monitor process, run the pipeline or the program, tell the
monitor how it ended.

In: a pipeline (or a program using the drop-in queues) and queries. Out: a ``RunResult``, and the
run file the monitor process wrote.
"""

from __future__ import annotations

from streamscope.runtime.session import RunOptions, RunResult, run

__all__ = ["RunOptions", "RunResult", "run"]
