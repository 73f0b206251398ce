"""What a monitored run is asked to do, and what it gave.

In: ``RunOptions`` (``core.options``: resolved once, at the API or the command line). Out: the
run file's ``RunMeta``, the checks made before anything runs, and the ``RunResult`` a run
returns.
"""

from __future__ import annotations

import inspect
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import native
from streamscope.core.errors import ConfigError
from streamscope.core.modes import RunStatus, parse
from streamscope.core.options import RunOptions
from streamscope.core.version import VERSION
from streamscope.store.runstore import RunMeta, RunStore

__all__ = [
    "INTERRUPTED",
    "FramesCallback",
    "LagCallback",
    "RunOptions",
    "RunResult",
    "check_out",
    "make_meta",
    "told_lag",
]

FramesCallback = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]


class LagCallback(Protocol):
    """Told, with each batch of frames, how far the monitor is behind the program (ns) and,
    where it runs in a process of its own, that process's CPU time so far (ns; None where it
    is not known: a monitor in a thread of the program's process)."""

    def __call__(self, lag_ns: int, cpu_ns: int | None = None) -> None: ...


def told_lag(callback: Callable[..., None], lag_ns: int, cpu_ns: int | None) -> None:
    """``callback`` told the lag, and the monitor's CPU where it takes a second argument: a
    caller's ``on_lag`` of one argument (as ``ss.run`` documents it) is told the lag alone."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        callback(lag_ns)
        return
    takes = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if takes >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params):
        callback(lag_ns, cpu_ns)
    else:
        callback(lag_ns)


#: Why a run was interrupted by Ctrl-C.
INTERRUPTED = "interrupted by the user (SIGINT)"


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: its ``status`` and why (``error``), its file (``path``) or in-memory
    ``store``, the ``stage`` that failed it (if one did), and the monitor's own figures."""

    status: RunStatus
    error: str | None
    path: Path | None
    store: RunStore | None = None
    stage: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: A program run as it is (``streamscope run prog.py``): its exit status as ``subprocess``
    #: gives it (negative: killed by that signal); None for a pipeline.
    program_exit: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", parse(RunStatus, self.status, "run status"))

    def _repr_html_(self) -> str:
        """In a notebook: the run's findings, pipeline graph and tables."""
        from streamscope.report.notebook import result_html

        return result_html(self)

    def with_program_exit(self, code: int) -> RunResult:
        return replace(self, program_exit=code)

    @property
    def exit_code(self) -> int:
        """The command's exit status: the run's (``RunStatus.exit_code``); for a program, the
        program's own (negative: the signal that killed it), unless the program ended well
        and the run failed all the same."""
        if self.program_exit is not None and (self.program_exit or self.status != RunStatus.FAILED):
            return self.program_exit
        return self.status.exit_code


def make_meta(name: str, opts: RunOptions) -> RunMeta:
    return RunMeta(
        run_id=uuid.uuid4().hex,
        name=name,
        app=opts.app,
        command=opts.command,
        argv=opts.argv,
        host=socket.gethostname(),
        started_unix_ns=time.time_ns(),
        frame_ns=opts.frame_ns,
        version=VERSION,
        probe_core=native.IMPLEMENTATION,
        cpus=len(os.sched_getaffinity(0)),
    )


#: Free space a run needs where its file goes, checked before anything runs (the file itself,
#: its write-ahead log and the reserve kept to finish it should the disk fill: store/writer.py).
MIN_FREE_BYTES = 32 << 20


def check_out(out: Path | None, overwrite: bool) -> None:
    """Refuse an output file that cannot be written, before anything runs."""
    if out is None:
        return
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists already; choose another --out or pass --overwrite")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"cannot write {out}: directory {parent} is not writable")
    st = os.statvfs(parent)
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"cannot write {out}: only {free / 2**20:.1f} MiB free in {parent}; a run needs at "
            f"least {MIN_FREE_BYTES >> 20} MiB (free some space or choose another --out)"
        )
