"""A run file its monitor left unfinished, or never made, finished by the process that ran the run
(``runtime.unfinished``): at every point a monitor can die while it makes the file, the file is
then a finished ``failed`` run that names the cause and reads back as any run does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import streamscope as ss
from streamscope.core.errors import RunFileError
from streamscope.core.modes import RunStatus
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import Topology
from streamscope.query.plan import Plan
from streamscope.runtime.options import RunOptions, make_meta
from streamscope.runtime.session import prepare
from streamscope.runtime.unfinished import finish_failed
from streamscope.store.lock import WriterLock
from streamscope.store.writer import DuckDBStore, RunMeta

CAUSE = "the run stopped: the monitor process was killed (SIGKILL) while it started"


@pytest.fixture
def run_of(tmp_path: Path) -> tuple[RunMeta, Topology, Plan]:
    p = ss.Pipeline("tiny")
    p.add("src", lambda: iter(range(3)))
    p.add("sink", lambda x: None)
    p.chain("src", "sink", capacity=4)
    plan, topology = prepare(p, [], 100_000_000)
    return make_meta("tiny", RunOptions(out=tmp_path / "run.duckdb")), topology, plan


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[WriterLock]:
    """The run file's writer lock, as the command holds it for its run."""
    held = WriterLock(tmp_path / "run.duckdb").acquire()
    yield held
    held.release()


def _monitors_store(path: Path, lock: WriterLock) -> DuckDBStore:
    """The store a monitor writes with, on its copy of the command's lock."""
    assert lock.fd is not None
    return DuckDBStore(path, overwrite=True, lock=WriterLock.adopt(path, os.dup(lock.fd)))


def _finish(
    path: Path, about: tuple[RunMeta, Topology, Plan], lock: WriterLock, overwrite: bool = False
) -> tuple[RunStatus, str | None]:
    assert lock.fd is not None
    return finish_failed(path, *about, CAUSE, lock_fd=lock.fd, overwrite=overwrite)


def _reads_as_failed(path: Path, meta: RunMeta) -> ss.Run:
    run = ss.load(path)
    assert (run.status, run.error) == ("failed", CAUSE)
    assert (run.meta.run_id, run.meta.name, run.meta.app) == (meta.run_id, "tiny", meta.app)
    assert {s.name for s in run.topology.stages} == {"src", "sink"}
    assert [q.text for q in run.queries][:1] == ["occupancy(* -> *)"]
    return run


def test_a_monitor_dead_before_it_made_the_file_leaves_one_made_here(
    tmp_path: Path, run_of: tuple[RunMeta, Topology, Plan], lock: WriterLock
) -> None:
    out = tmp_path / "run.duckdb"
    assert _finish(out, run_of, lock) == (RunStatus.FAILED, CAUSE)
    with _reads_as_failed(out, run_of[0]) as run:
        assert run.duration_ns == 0
        assert run.results(0, "src -> sink") == []


@pytest.mark.parametrize("made", ["empty", "cut short"])
def test_a_monitor_dead_while_it_made_the_file_leaves_it_made_anew(
    tmp_path: Path, run_of: tuple[RunMeta, Topology, Plan], lock: WriterLock, made: str
) -> None:
    """Killed once it had made the file empty (its tables, no run yet), or while it wrote it:
    neither reads as a run (``load`` refuses both), and the file is made anew."""
    out = tmp_path / "run.duckdb"
    store = _monitors_store(out, lock)
    store.open()
    store.close()
    if made == "cut short":
        out.write_bytes(out.read_bytes()[:5000])
    with pytest.raises(RunFileError):
        ss.load(out).close()
    assert _finish(out, run_of, lock) == (RunStatus.FAILED, CAUSE)
    _reads_as_failed(out, run_of[0]).close()


def test_a_file_the_monitor_began_is_finished_with_what_it_holds(
    tmp_path: Path, run_of: tuple[RunMeta, Topology, Plan], lock: WriterLock
) -> None:
    """Killed after it began the run: its file is finished, not made anew (what it wrote
    stays)."""
    out = tmp_path / "run.duckdb"
    meta, topology, _ = run_of
    store = _monitors_store(out, lock)
    store.begin(meta, topology, [])
    store.write_table(TableRows("note", {"about": ["monitor"], "text": ["written first"]}))
    store.close()
    assert _finish(out, run_of, lock) == (RunStatus.FAILED, CAUSE)
    with ss.load(out) as run:
        assert (run.status, run.error, run.meta.run_id) == ("failed", CAUSE, meta.run_id)
        assert run.sql("SELECT text FROM note")[1] == [("written first",)]


def test_a_file_the_monitor_finished_says_how_it_ended(
    tmp_path: Path, run_of: tuple[RunMeta, Topology, Plan], lock: WriterLock
) -> None:
    """Killed once it had finished the file, before it said so: the file is left as it is,
    and it says how the run ended."""
    out = tmp_path / "run.duckdb"
    meta, topology, _ = run_of
    store = _monitors_store(out, lock)
    store.begin(meta, topology, [])
    store.finish("completed", None, meta.started_unix_ns + 1, 1)
    store.close()
    assert _finish(out, run_of, lock) == (RunStatus.COMPLETED, None)
    with ss.load(out) as run:
        assert (run.status, run.error) == ("completed", None)


@pytest.mark.parametrize("overwrite", [False, True])
def test_another_runs_file_is_replaced_only_when_the_run_was_to_replace_it(
    tmp_path: Path, run_of: tuple[RunMeta, Topology, Plan], lock: WriterLock, overwrite: bool
) -> None:
    """The monitor died before it replaced the file of an earlier run (``--overwrite``): that
    one is replaced. Without ``--overwrite`` there was none (the command refuses a path that
    exists): one there now is not this run's, and is left alone."""
    out = tmp_path / "run.duckdb"
    meta, topology, _ = run_of
    store = _monitors_store(out, lock)
    store.begin(make_meta("earlier", RunOptions(out=out)), topology, [])
    store.finish("completed", None, meta.started_unix_ns, 1)
    store.close()
    if not overwrite:
        with pytest.raises(RunFileError, match="holds another run"):
            _finish(out, run_of, lock)
        with ss.load(out) as run:
            assert (run.meta.name, run.status) == ("earlier", "completed")
        return
    assert _finish(out, run_of, lock, overwrite=True) == (RunStatus.FAILED, CAUSE)
    _reads_as_failed(out, meta).close()
