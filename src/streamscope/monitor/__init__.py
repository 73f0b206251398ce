"""The monitor: composition root of transport → timebase → aggregate → store."""

from __future__ import annotations

from streamscope.monitor.session import RunOptions, RunResult, prepare, run

__all__ = ["RunOptions", "RunResult", "prepare", "run"]
