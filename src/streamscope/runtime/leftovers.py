"""What runs killed outright left behind, cleaned by the next run.

In: the folder that holds the runs' private directories (``core.rings.ring_directory``). Out:
the directories of runs none of whose processes still runs removed, each with its run file
finished (left ``running``: finalised as failed, its frames kept) and its lock file gone. A run
with any process alive (the one that made its directory, its monitor, any process of its
program) is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from streamscope.core.errors import RunFileError
from streamscope.store.lock import REPAIRING, WriterLock, repair

#: In a run's private directory: the path of its run file, for the run that finds it left.
RUN_FILE = "run-file"
#: Where there is no ``/proc`` to say which processes still use a directory: how long (s)
#: after its maker ended it is left for the run's other processes to finish.
STALE_AFTER_S = 60.0
_PREFIX = "streamscope-"
_PROC = Path("/proc")


def sweep(root: str | Path) -> list[Path]:
    """Remove the run directories in ``root`` that no live process uses and finish their run
    files; returns those removed."""
    left = [d for d in Path(root).glob(f"{_PREFIX}*-*") if _maker_gone(d)]
    if not left:
        return []
    used = _in_use(left)
    removed = []
    for d in left:
        if d in used:
            continue
        try:
            out: Path | None = Path(d.joinpath(RUN_FILE).read_text())
        except OSError:
            out = None
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
        if out is not None:
            _finish(out)
    return removed


def record_run_file(directory: str | Path, out: Path) -> None:
    """Say in the run's private ``directory`` which run file it writes (``sweep`` reads it)."""
    Path(directory, RUN_FILE).write_text(str(out.resolve()))


def _finish(out: Path) -> None:
    """Finish the run file ``out`` that a killed run left, under its lock (taken as no one
    writes it); the lock file goes. A file finished already (the first command that opened
    it repaired it) is left alone: taking its lock would make a lock file again, for a moment,
    where that command had removed it."""
    if not out.parent.is_dir() or not _left_running(out):
        return
    try:
        lock = WriterLock(out).acquire(REPAIRING)
    except (RunFileError, OSError):
        return  # a live run writes it now, or its folder is not ours to write
    try:
        if out.is_file():
            with contextlib.suppress(RunFileError):
                repair(out, holding=True)
    finally:
        lock.release()


def _left_running(out: Path) -> bool:
    """Whether the run file ``out`` says it is still running (False where it cannot be read:
    gone, not a run file, or open for writing by a live run)."""
    from streamscope.store.duck import duckdb

    try:
        with duckdb.connect(str(out), read_only=True) as con:
            row = con.execute("SELECT status FROM run").fetchone()
    except (duckdb.Error, OSError):
        return False
    return row is not None and row[0] == "running"


def _maker_gone(d: Path) -> bool:
    """Whether the process that made the run directory ``d`` has ended (its number taken by
    a process started since does not count); False for one not ours."""
    try:
        pid = int(d.name[len(_PREFIX) :].split("-")[0])
        st = d.stat()
    except (ValueError, OSError):
        return False
    if st.st_uid != os.geteuid():
        return False
    started = _started(pid)
    return started is None or started > st.st_mtime + 1.0


def _started(pid: int) -> float | None:
    """When process ``pid`` started (Unix seconds; 0: alive, unknown when); None: there is no
    such process."""
    if _PROC.is_dir():
        try:
            stat = Path(_PROC, str(pid), "stat").read_text()
        except FileNotFoundError:
            return None
        with contextlib.suppress(OSError, ValueError, IndexError):
            ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
            return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
        return 0.0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass
    return 0.0


def _boot_time() -> float:
    for line in Path(_PROC, "stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


def _in_use(dirs: Sequence[Path]) -> set[Path]:
    """Those of ``dirs`` that a live process uses: it names one on its command line (a
    monitor) or in its environment (a program's process: the session it inherited)."""
    if not _PROC.is_dir():
        return {d for d in dirs if time.time() - _modified(d) < STALE_AFTER_S}
    marks = {d: str(d).encode() for d in dirs}
    used: set[Path] = set()
    for entry in os.listdir(_PROC):
        if not entry.isdigit():
            continue
        for what in ("cmdline", "environ"):
            try:
                text = Path(_PROC, entry, what).read_bytes()
            except OSError:
                continue
            used.update(d for d, mark in marks.items() if mark in text)
    return used


def _modified(d: Path) -> float:
    try:
        return d.stat().st_mtime
    except OSError:
        return time.time()


__all__ = ["RUN_FILE", "STALE_AFTER_S", "record_run_file", "sweep"]
