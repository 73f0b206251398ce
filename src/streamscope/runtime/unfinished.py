"""A run file whose monitor process died before it finished it (or before it made it), finished by
the process that ran the run, which outlives its monitor.

In: the run file's path, what the run is (its metadata, topology and compiled plan) and why its
monitor stopped. Out: the file, a finished ``failed`` run naming that cause: the one the monitor
began, with every frame it committed (``store.lock.repair``); else, where the monitor died before
it began the file (nothing there yet, the empty file it was making, or the earlier file it was to
replace), a new one that describes the run and holds no frame. Loaded only then: it loads DuckDB
and the monitor's modules, which the start of a run does not.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from streamscope.core.errors import RunFileError
from streamscope.core.modes import RunStatus
from streamscope.core.topology import Topology
from streamscope.query.plan import Plan
from streamscope.store.writer import RunMeta


def monitor_died(
    path: Path,
    about: tuple[RunMeta, Topology, Plan],
    error: str,
    *,
    lock_fd: int,
    overwrite: bool,
    t0_ticks: int = 0,
) -> tuple[RunStatus, str | None]:
    """The run file at ``path`` of the run ``about`` describes (its metadata, topology and
    plan), whose monitor died as ``error`` says, finished by ``finish_failed``, the cause
    ``the run stopped: ERROR``; how the run then ended and why, as the command says it (the
    file's own words where they are not the cause; ``error`` where the file could not be
    written, saying so)."""
    cause = f"the run stopped: {error}"
    try:
        status, said = finish_failed(path, *about, cause, lock_fd=lock_fd, overwrite=overwrite,
                                     t0_ticks=t0_ticks)  # fmt: skip
    except Exception as e:  # (whatever it was, the command still says how the run ended)
        return RunStatus.FAILED, f"{error}; the run file could not be finalised: {e}"
    return status, error if said == cause else said


def finish_failed(
    path: Path,
    meta: RunMeta,
    topology: Topology,
    plan: Plan,
    cause: str,
    *,
    lock_fd: int,
    overwrite: bool,
    t0_ticks: int = 0,
) -> tuple[RunStatus, str | None]:
    """Finish the run file at ``path`` of the run ``meta`` names as failed with ``cause``; how
    the file then says the run ended (its monitor may have finished it, and died before it
    said so). ``lock_fd``: the run file's writer lock, which this process holds; ``overwrite``:
    whether the run was to replace another run's file; ``t0_ticks``: the run's virtual time zero
    where it started (0: it did not). Raises ``RunFileError`` where the file cannot be written."""
    from streamscope.store.lock import repair

    found = _run_row(path)
    if found is not None and found[0] == meta.run_id:
        if found[1] != RunStatus.RUNNING.value:
            return RunStatus(found[1]), found[2]
        repair(path, cause, holding=True)
        return RunStatus.FAILED, cause
    if found is not None and not overwrite:
        raise RunFileError(f"{path} holds another run, left as it was")
    _write_failed(path, meta, topology, plan, cause, lock_fd, t0_ticks)
    return RunStatus.FAILED, cause


def _run_row(path: Path) -> tuple[str, str, str | None] | None:
    """The run file's run (its id, status and error) as it is, repaired by nobody; None where
    there is none: no file, or one its monitor was still making (no run yet, or not even a
    DuckDB file)."""
    from streamscope.store.duck import duckdb

    if not path.is_file():
        return None
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        rows = con.execute("SELECT run_id, status, error FROM run").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    if len(rows) != 1:
        return None
    run_id, status, error = rows[0]
    return str(run_id), str(status), None if error is None else str(error)


def _write_failed(
    path: Path,
    meta: RunMeta,
    topology: Topology,
    plan: Plan,
    cause: str,
    lock_fd: int,
    t0_ticks: int,
) -> None:
    """A new run file at ``path``: the run as it was to be recorded, no frame, failed."""
    from streamscope.monitor.service import query_records
    from streamscope.store.lock import WriterLock
    from streamscope.store.writer import DuckDBStore

    # The store lets go of the lock it is given when it closes: it gets a copy of this
    # process's, which holds the lock until the run's end.
    store = DuckDBStore(path, overwrite=True, lock=WriterLock.adopt(path, os.dup(lock_fd)))
    try:
        store.begin(replace(meta, t0_host_ns=t0_ticks), topology, query_records(plan, topology))
        store.finish(RunStatus.FAILED.value, cause, time.time_ns(), 0)
    finally:
        store.close()


__all__ = ["finish_failed", "monitor_died"]
