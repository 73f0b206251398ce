"""What the ``streamscope`` command says when Ctrl-C or SIGTERM ends it, and its exit status.

In: the ``KeyboardInterrupt`` (``core.process.SignalInterrupt``) that ended it, and its command.
Out: one line on stderr, and 130. ``run`` says whether its run had a file yet, and which.
"""

from __future__ import annotations

import sys
from pathlib import Path

from streamscope.cli.common import fail


def interrupted(exc: BaseException, command: str | None) -> int:
    """Say that ``exc`` (a signal, or a prompt given up) ended ``command``; returns 130. A run
    that took its file finished it, saying how it ended (``runtime.launch.TAKEN``); before
    that, none was written."""
    from streamscope.core.process import interruption

    why = interruption(exc) if isinstance(exc, KeyboardInterrupt) else "interrupted"
    if command == "run":
        launch = sys.modules.get("streamscope.runtime.launch")  # loaded where a run began
        taken: list[Path] = getattr(launch, "TAKEN", [])
        if taken:
            why += f"; the run file {taken[-1]} says how the run ended"
        else:
            why += " before the run started: no run file was written"
    return fail(why, 130)


__all__ = ["interrupted"]
