"""When streamscope began loading in this process, by the process's CPU clock.

Imported first by ``streamscope/__init__``: what the process ran before is the interpreter's
own start, the same as plainly; a program's process counts what it ran after, up to the
program's first line, as what being watched cost its start (``pipeline.program.auto.costs``).
"""

from __future__ import annotations

import time

#: The process's CPU time (ns) when streamscope began loading in it; a forked child's clock
#: starts anew, and its copy of this says nothing of it.
CPU_NS = time.process_time_ns()

__all__ = ["CPU_NS"]
