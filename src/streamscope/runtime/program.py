"""Running an unmodified program monitored: ``streamscope run prog.py`` without ``pipeline()``.

In: a script's path (or a module's name), its arguments, queries (none: the defaults) and run
options. Out: the run's ``RunResult``. The program runs here as ``__main__``, as ``python
prog.py`` would run it, with its standard queues, threads and processes instrumented
(``pipeline.auto``); its own output is left alone, and the run ends once its threads and
processes have (as the interpreter would wait for them at exit).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from streamscope.core.errors import AppError
from streamscope.pipeline import auto
from streamscope.query.ast import Query
from streamscope.runtime.instrument import monitor
from streamscope.runtime.options import FramesCallback, RunOptions, RunResult


class ProgramFailed(AppError):
    """The program raised, or exited with a status other than 0."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _join_program() -> None:
    """Wait for the program's threads and processes, as the interpreter waits at exit: every
    thread not a daemon, every child process not a daemon."""
    me = threading.current_thread()
    while True:
        left = [
            t
            for t in threading.enumerate()
            if t is not me and not t.daemon and t is not threading.main_thread()
            and not _own(t)
        ]  # fmt: skip
        kids = [p for p in mp.active_children() if not p.daemon]
        if not left and not kids:
            return
        for t in left:
            t.join()
        for p in kids:
            p.join()


def _own(t: threading.Thread) -> bool:
    """A thread of streamscope's (an inline monitor)."""
    target = getattr(t, "_target", None)
    module = getattr(target, "__module__", None) or type(t).__module__
    return module.startswith("streamscope")


def run_program(
    target: str,
    argv: Sequence[str],
    queries: Sequence[Query | str],
    options: RunOptions,
    *,
    module: bool = False,
    on_frames: FramesCallback | None = None,
    on_lag: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``target`` (a script's path; a module's name with ``module``) as ``__main__`` with
    ``argv`` under the monitor. The program's exception is printed as Python prints it, and
    the run is then failed (its status says so), as it is when the program exits non-zero."""
    name = target if module else Path(target).stem
    saved_argv = sys.argv[:]
    auto.install()
    session = None
    try:
        with monitor(
            queries, options, on_frames=on_frames, on_lag=on_lag, on_note=on_note, name=name
        ) as session:
            status = 0
            sys.argv = [target, *argv]
            try:
                if module:  # as python -m: found from the working directory too
                    sys.path.insert(0, os.getcwd())
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    sys.path.insert(0, str(Path(target).resolve().parent))
                    runpy.run_path(target, run_name="__main__")
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int | None):
                    print(exc.code, file=sys.stderr)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                traceback.print_exc()
                raise ProgramFailed(f"{name} raised {type(exc).__name__}: {exc}", 1) from None
            finally:
                _join_program()
            if status:
                raise ProgramFailed(f"{name} exited with status {status}", status)
    except ProgramFailed:
        pass  # the session's result says so
    finally:
        sys.argv = saved_argv
        auto.uninstall()
    assert session is not None
    assert session.result is not None
    return session.result


__all__ = ["ProgramFailed", "run_program"]
