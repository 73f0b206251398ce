"""A run file and what is made beside it are their owner's alone (0600), in a process whose
umask would make them readable by all: the run file before any row is in it, its lock, its
reserve, and DuckDB's log, which DuckDB makes itself."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_store_writer import QUERIES, TOPOLOGY, F  # the same two-stage run

from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.store import DuckDBStore, RunMeta, _template
from streamscope.store.private import keep_private, make_private

META = RunMeta(run_id="r", name="p", app="p.py", command="p.py --token s3cret",
               argv=("--token", "s3cret"), host="h", started_unix_ns=0, frame_ns=F,
               version="0")  # fmt: skip


@pytest.fixture
def umask() -> Iterator[None]:
    """This process's umask, open to all (as a program's may be), put back after."""
    was = os.umask(0o022)
    yield
    os.umask(was)


def modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize("copied", [True, False], ids=["from the template", "made anew"])
def test_a_run_file_and_its_siblings_are_private(
    tmp_path: Path, copied: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not copied:  # no template could be kept or copied: DuckDB makes the file itself
        monkeypatch.setattr(_template, "copy_into", lambda target: target.unlink() or False)
    out = tmp_path / "run.duckdb"
    store = DuckDBStore(out, checkpoint_every=0)  # the log is never folded while it runs
    store.begin(META, TOPOLOGY, QUERIES)
    store.write_frames([FrameResult(0, "a -> b", 0, 0, F, F, (ScalarPoint("mean", 1.0),))])
    seen = modes(tmp_path)
    assert set(seen) == {"run.duckdb", "run.duckdb.wal", "run.duckdb.lock", "run.duckdb.reserve"}
    assert set(seen.values()) == {0o600}, seen
    store.finish("completed", None, 1, F)
    store.close()
    assert modes(tmp_path) == {"run.duckdb": 0o600}


def test_a_stricter_umask_is_kept(tmp_path: Path) -> None:
    was = os.umask(0o277)
    try:
        assert make_private(tmp_path / "f") == 0o400
        keep_private()
        assert os.umask(0o022) == 0o277  # kept as it was: it forbids more already
        keep_private()
        assert os.umask(0o022) == 0o077
    finally:
        os.umask(was)
