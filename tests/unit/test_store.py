"""Run store: DuckDB and in-memory round trips, lifecycle, crash safety, refusals, JSON, SQL."""

from __future__ import annotations

import inspect
import json
import os
import signal
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamscope.store
from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.core.errors import QueryError, RunFileError
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.store import (
    DuckDBStore,
    InMemoryStore,
    QueryRecord,
    Run,
    RunMeta,
    RunStore,
    load,
)
from streamscope.store.lock import WRITER_GONE, lock_path
from streamscope.store.schema import (
    SCHEMA_VERSION,
    TABLES,
    quantile_of,
    quantile_stat,
    schema_markdown,
)

STORE_DIR = Path(streamscope.store.__file__).parent
SRC_DIR = STORE_DIR.parents[1]

TOPOLOGY = Topology(
    "mm1",
    resources=(ResourceInfo("main", "thread"), ResourceInfo("dev0", "emulated", "dev0", 2.5)),
    stages=(
        StageInfo("source", "main", "source"),
        StageInfo("server", "dev0", "stage"),
        StageInfo("sink", "main", "sink"),
    ),
    channels=(
        ChannelInfo("source -> server", "source", "server", 16, "device"),
        ChannelInfo("server -> sink", "server", "sink", 4),
    ),
    probes=(
        ProbeInfo(0, "tail", "source -> server"),
        ProbeInfo(1, "head", "source -> server", "dev0"),
        ProbeInfo(2, "state", "server", "dev0"),
    ),
)
META = RunMeta(
    run_id="run-1",
    name="mm1",
    app="examples/mm1.py",
    command="streamscope run examples/mm1.py --out mm1.duckdb",
    argv=("--rho", "0.8"),
    host="lab-host",
    started_unix_ns=1_700_000_000_000_000_000,
    frame_ns=500_000_000,
    version="0.1.0",
)
QUERIES = (
    QueryRecord(
        1,
        "occupancy(source -> server): mean, max, quantiles, histogram every 500ms",
        "occupancy",
        "items",
        500_000_000,
        ("source -> server",),
        ("mean", "max", "quantiles", "histogram"),
    ),
    QueryRecord(
        2, "state(server): duty every 500ms", "state", "", 500_000_000, ("server",), ("duty",)
    ),
)
EDGES = (0.0, 1.0, 2.0, 4.0)


def _frame(query_id: int, frame: int) -> FrameResult:
    """A deterministic result: every point type, some values missing."""
    t0 = frame * 500_000_000
    if query_id == 1:
        points: tuple[Point, ...] = (
            ScalarPoint("mean", 1.25 + frame),
            ScalarPoint("max", None if frame == 0 else float(frame + 3)),
            QuantilesPoint((0.5, 0.99, 0.999), (1.0, 3.5, None)),
            HistogramPoint(EDGES, (10.0, 5.0 + frame, 0.5), under=0.0, over=2.0),
        )
        return FrameResult(1, "source -> server", frame, t0, t0 + 500_000_000, 500_000_000, points)
    fractions = (0.25, 0.5, 0.125, 0.125)
    duty = DutyPoint(("idle", "busy", "blocked_in", "blocked_out"), fractions)
    return FrameResult(2, "server", frame, t0, t0 + 500_000_000, 400_000_000, (duty,))


def _results(frames: range) -> list[FrameResult]:
    return [_frame(q, f) for f in frames for q in (1, 2)]


def _sorted(results: list[FrameResult]) -> list[FrameResult]:
    return sorted(results, key=lambda r: (r.query_id, r.target, r.frame))


DROPS = [DropCount(0, 0, 0, 120), DropCount(2, 1, 3, 40), DropCount(0, 1, 7, 100)]


def _write(store: RunStore, *, finish: bool = True) -> list[FrameResult]:
    store.begin(META, TOPOLOGY, QUERIES)
    written = _results(range(3))
    store.write_frames(written[:4])
    store.write_frames(written[4:])
    store.write_drops(DROPS)
    if finish:
        store.finish("completed", None, META.started_unix_ns + 2_000_000_000, 1_500_000_000)
    store.close()
    return written


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs" / "mm1.duckdb"
    _write(DuckDBStore(path))
    return path


def test_round_trip_through_a_duckdb_file(run_file: Path) -> None:
    with load(run_file) as run:
        assert run.meta == META
        assert run.topology == TOPOLOGY
        assert run.queries == QUERIES
        assert (run.status, run.error) == ("completed", None)
        assert run.ended_unix_ns == META.started_unix_ns + 2_000_000_000
        assert run.duration_ns == 1_500_000_000
        assert run.results() == _sorted(_results(range(3)))
        assert run.results(2) == [_frame(2, f) for f in range(3)]
        assert run.results(target="source -> server") == [_frame(1, f) for f in range(3)]
        assert run.results(1, "server") == []
        assert run.drops() == sorted(DROPS, key=lambda d: (d.probe_id, d.frame))
        with load(run_file) as second_reader:
            assert second_reader.results(1) == run.results(1)


@pytest.mark.parametrize("whole", [True, False])
def test_a_small_run_read_whole_answers_as_a_large_one_read_by_query(
    run_file: Path, whole: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of at most ``WHOLE_READ_FRAMES`` frames is read whole at its first ``results``
    (three queries in all); a larger one by query and target: the same results either way,
    for every filter."""
    import streamscope.store.run as run_module

    monkeypatch.setattr(run_module, "WHOLE_READ_FRAMES", 20_000 if whole else 5)
    with load(run_file) as run:
        assert run.results(2) == [_frame(2, f) for f in range(3)]
        assert run.results(1, "source -> server") == [_frame(1, f) for f in range(3)]
        assert run.results(target="server") == [_frame(2, f) for f in range(3)]
        assert run.results() == _sorted(_results(range(3)))
        assert run.results(1, "server") == [] and run.results(7) == []
        assert bool(run._whole) is whole  # the way it was read


def test_a_store_reads_back_what_it_wrote_through_its_own_connection(tmp_path: Path) -> None:
    """``written``: the finished run read through the writer's connection (the monitor says
    the run from it), as ``load`` reads the file; closing that run leaves the store's
    connection open until the store is closed."""
    path = tmp_path / "w.duckdb"
    store = DuckDBStore(path)
    store.begin(META, TOPOLOGY, QUERIES)
    store.write_frames(_results(range(3)))
    store.finish("completed", None, META.started_unix_ns + 2_000_000_000, 1_500_000_000)
    with store.written() as run:
        mine = (run.meta, run.status, run.topology, run.queries, run.results())
    with store.written() as again:  # the connection is still the store's
        assert again.results(2) == [_frame(2, f) for f in range(3)]
    store.close()
    with pytest.raises(RunFileError, match="not open for writing"):
        store.written()
    with load(path) as run:
        assert mine == (run.meta, run.status, run.topology, run.queries, run.results())


def test_in_memory_store_reads_back_like_the_file(run_file: Path) -> None:
    memory = InMemoryStore()
    _write(memory)
    mem_run = Run.from_memory(memory)
    with load(run_file) as file_run:
        assert mem_run.results() == file_run.results()
        assert mem_run.drops() == file_run.drops()
        assert mem_run.to_json() == file_run.to_json()
        query = "SELECT stat, round(sum(value), 6) FROM stat GROUP BY stat ORDER BY stat"
        assert mem_run.sql(query) == file_run.sql(query)


def test_status_lifecycle(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    store = DuckDBStore(path)
    with pytest.raises(RuntimeError, match="write_frames"):
        store.write_frames([_frame(1, 0)])
    store.begin(META, TOPOLOGY, QUERIES)
    with pytest.raises(RunFileError, match="open for writing"):
        load(path)
    with pytest.raises(ValueError, match="completed, failed, interrupted"):
        store.finish("running", None, 0, 0)
    store.close()
    # Closed without finishing: its writer is gone, so the first load finalises it as failed.
    assert not lock_path(path).exists()
    with load(path) as run:
        assert (run.status, run.error) == ("failed", WRITER_GONE)
        assert (run.ended_unix_ns, run.duration_ns) == (META.started_unix_ns, 0)

    failed = tmp_path / "failed.duckdb"
    with DuckDBStore(failed) as store:
        store.begin(META, TOPOLOGY, QUERIES)
        store.finish("failed", "stage 'server' raised ZeroDivisionError", 5, 4)
        with pytest.raises(RuntimeError, match="finished"):
            store.write_frames([_frame(1, 0)])
    with load(failed) as run:
        assert (run.status, run.error) == ("failed", "stage 'server' raised ZeroDivisionError")
        assert (run.ended_unix_ns, run.duration_ns) == (5, 4)


def test_existing_file_is_kept_unless_overwrite(run_file: Path) -> None:
    with pytest.raises(RunFileError, match="already exists"):
        DuckDBStore(run_file)
    with DuckDBStore(run_file, overwrite=True) as store:
        store.begin(META, TOPOLOGY, QUERIES[:1])
        store.write_frames([_frame(1, 7)])
    with load(run_file) as run:
        assert run.queries == QUERIES[:1]
        assert run.results() == [_frame(1, 7)]
        assert run.drops() == []


def _batch(b: int) -> list[FrameResult]:
    """Batch ``b`` of the killed writer: 20 frames of query 1, each with a 64-bin histogram."""
    edges = tuple(float(i) for i in range(65))
    out = []
    for f in range(b * 20, b * 20 + 20):
        weights = tuple(float((f * 7 + i) % 13) for i in range(64))
        points = (ScalarPoint("mean", f / 3), HistogramPoint(edges, weights, 1.0, float(f)))
        out.append(FrameResult(1, "source -> server", f, f * 10, f * 10 + 10, 10, points))
    return out


_CHILD = """
import sys
from streamscope.aggregate.points import FrameResult, HistogramPoint, ScalarPoint
from streamscope.core.topology import Topology
from streamscope.store import DuckDBStore, QueryRecord, RunMeta

{batch}
meta = RunMeta("killed", "k", "app.py", "cmd", (), "host", 1, 10, "0.1.0")
query = QueryRecord(1, "q", "occupancy", "items", 10, ("source -> server",), ("mean", "histogram"))
store = DuckDBStore(sys.argv[1], checkpoint_every=int(sys.argv[2]))
store.begin(meta, Topology("k"), [query])
for b in range(100_000):
    store.write_frames(_batch(b))
    if b == 2:
        print("committed", flush=True)
"""


@pytest.mark.parametrize("checkpoint_every", [1, 0])
def test_killed_writer_leaves_a_loadable_file_with_every_committed_frame(
    tmp_path: Path, checkpoint_every: int
) -> None:
    path = tmp_path / "killed.duckdb"
    script = _CHILD.format(batch=inspect.getsource(_batch))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(path), str(checkpoint_every)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "committed"
        with pytest.raises(RunFileError, match="lock"):
            load(path)  # another process is writing it
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert lock_path(path).exists()  # left by the killed writer, held by nobody
    with load(path) as run:
        # Its writer is gone: finalised as failed on opening, every committed frame kept.
        assert (run.status, run.error) == ("failed", WRITER_GONE)
        assert not lock_path(path).exists()
        results = run.results()
        assert run.duration_ns == max(r.t_end_ns for r in results)
        assert len(results) >= 60
        assert len(results) % 20 == 0  # whole batches only: each call is one transaction
        assert results == [r for b in range(len(results) // 20) for r in _batch(b)]


def test_files_that_are_not_runs_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n" * 100)
    with pytest.raises(RunFileError, match=r"notes\.duckdb .*not a streamscope run file"):
        load(text)

    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(RunFileError, match=r"other\.duckdb is not a streamscope run file: .*meta"):
        load(other)

    wrong = tmp_path / "wrong.duckdb"
    with duckdb.connect(str(wrong)) as con:
        con.execute("CREATE TABLE streamscope_meta (key VARCHAR, value VARCHAR)")
        con.execute("INSERT INTO streamscope_meta VALUES ('format', 'something-else')")
    with pytest.raises(RunFileError, match="format 'something-else'"):
        load(wrong)

    with pytest.raises(RunFileError, match=r"missing\.duckdb does not exist"):
        load(tmp_path / "missing.duckdb")
    with pytest.raises(RunFileError, match="directory"):
        load(tmp_path)


def test_newer_schema_version_is_refused(run_file: Path) -> None:
    with duckdb.connect(str(run_file)) as con:
        con.execute(
            "UPDATE streamscope_meta SET value = ? WHERE key = 'schema_version'",
            [str(SCHEMA_VERSION + 1)],
        )
    with pytest.raises(
        RunFileError,
        match=f"schema_version '{SCHEMA_VERSION + 1}'; this streamscope reads {SCHEMA_VERSION}",
    ):
        load(run_file)


def test_to_json_is_the_documented_document(run_file: Path) -> None:
    with load(run_file) as run:
        doc = json.loads(json.dumps(run.to_json(), allow_nan=False))
    assert set(doc) == {
        "format", "schema_version", "run", "resources", "stages", "channels", "probes",
        "queries", "virtual_queues", "drops", "overhead", "monitor", "profiles", "trace_exclusions",
        "notes",
    }  # fmt: skip
    assert (doc["format"], doc["schema_version"]) == ("streamscope-run", SCHEMA_VERSION)
    assert doc["notes"] == []
    assert doc["virtual_queues"] == []
    assert doc["run"]["status"] == "completed"
    assert doc["run"]["argv"] == ["--rho", "0.8"]
    assert doc["run"]["pipeline"] == "mm1"
    assert [s["name"] for s in doc["stages"]] == ["source", "server", "sink"]
    q1, q2 = doc["queries"]
    assert set(q1) == {"id", "text", "metric", "unit", "frame_ns", "stats", "targets"}
    (target,) = q1["targets"]
    assert target["target"] == "source -> server"
    frame = target["frames"][1]
    assert set(frame) == {
        "frame", "t_start_ns", "t_end_ns", "covered_ns", "stats", "histogram", "duty",
    }  # fmt: skip
    assert frame["stats"] == {"mean": 2.25, "max": 4.0, "p50": 1.0, "p99": 3.5, "p99.9": None}
    assert frame["histogram"] == {
        "edges": list(EDGES), "weights": [10.0, 6.0, 0.5], "under": 0.0, "over": 2.0,
    }  # fmt: skip
    assert frame["duty"] is None
    duty = q2["targets"][0]["frames"][0]
    assert duty["duty"] == {"idle": 0.25, "busy": 0.5, "blocked_in": 0.125, "blocked_out": 0.125}
    assert (duty["stats"], duty["histogram"]) == ({}, None)
    assert doc["drops"][0] == {
        "probe_id": 0, "kind": "tail", "target": "source -> server", "frame": 0, "dropped": 0,
        "recorded": 120,
    }  # fmt: skip


def test_sql_returns_columns_and_rows(run_file: Path) -> None:
    with load(run_file) as run:
        columns, rows = run.sql(
            "SELECT f.frame, f.t_start_ns, s.value FROM stat s JOIN frame f USING (query_id, target, frame)"
            " WHERE s.stat = 'p99' ORDER BY f.frame"
        )
        assert columns == ["frame", "t_start_ns", "value"]
        assert rows == [(0, 0, 3.5), (1, 500_000_000, 3.5), (2, 1_000_000_000, 3.5)]
        assert run.sql(
            "SELECT bin, lo, hi FROM histogram WHERE frame = 0 AND bin < 0 ORDER BY bin"
        ) == (
            ["bin", "lo", "hi"],
            [(-2, 4.0, None), (-1, None, 0.0)],
        )
        with pytest.raises(QueryError, match="read-only"):
            run.sql("DELETE FROM frame")
        with pytest.raises(QueryError):
            run.sql("SELECT nope FROM frame")


def test_schema_is_documented_in_the_file_and_in_schema_md(run_file: Path) -> None:
    assert schema_markdown() in (STORE_DIR / "SCHEMA.md").read_text()
    json_md = (STORE_DIR / "JSON.md").read_text()
    for key in ("schema_version", "covered_ns", "histogram", "duty", "recorded", "probe_id"):
        assert f"`{key}`" in json_md
    with load(run_file) as run:
        _, rows = run.sql("SELECT table_name, column_name, comment FROM duckdb_columns()")
    documented = {(t, c): doc for t, c, doc in rows}
    for table in TABLES:
        for column in table.columns:
            assert documented[(table.name, column.name)] == column.doc


@pytest.mark.parametrize(
    ("q", "name"),
    [
        (0.5, "p50"),
        (0.99, "p99"),
        (0.999, "p99.9"),
        (0.9999, "p99.99"),
        (1.0, "p100"),
        (0.0, "p0"),
        (0.001, "p0.1"),
    ],
)
def test_quantile_stat_names(q: float, name: str) -> None:
    assert quantile_stat(q) == name
    assert quantile_of(name) == q


@given(st.floats(0.0, 1.0))
def test_quantile_names_round_trip(q: float) -> None:
    assert quantile_of(quantile_stat(q)) == q


_values = st.floats(allow_nan=False)
_labels = st.lists(
    st.text(string.ascii_letters + "._", min_size=1, max_size=6),
    min_size=1,
    max_size=4,
    unique=True,
)


@st.composite
def _points(draw: st.DrawFn) -> tuple[Point, ...]:
    scalars = draw(st.lists(st.sampled_from(["count", "sum", "min", "max", "mean"]), unique=True))
    points: list[Point] = [ScalarPoint(s, draw(st.none() | _values)) for s in scalars]
    if draw(st.booleans()):
        qs = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4, unique=True))
        points.append(QuantilesPoint(tuple(qs), tuple(draw(st.none() | _values) for _ in qs)))
    if draw(st.booleans()):
        edges = sorted(draw(st.lists(st.floats(-1e9, 1e9), min_size=2, max_size=8, unique=True)))
        weights = tuple(draw(st.floats(0.0, 1e12)) for _ in edges[1:])
        points.append(
            HistogramPoint(
                tuple(edges), weights, draw(st.floats(0.0, 1e6)), draw(st.floats(0.0, 1e6))
            )
        )
    if draw(st.booleans()):
        labels = draw(_labels)
        points.append(DutyPoint(tuple(labels), tuple(draw(st.floats(0.0, 1.0)) for _ in labels)))
    return tuple(draw(st.permutations(points)))


@st.composite
def _runs(draw: st.DrawFn) -> tuple[tuple[QueryRecord, ...], list[FrameResult]]:
    """Queries with points each (in any order), and frames of those queries."""
    shapes = draw(st.lists(_points(), min_size=1, max_size=3))
    queries = tuple(
        QueryRecord(i, f"q{i}", "m", "u", 10, (), tuple(p.stat for p in shape))
        for i, shape in enumerate(shapes)
    )
    targets = st.text(string.printable + "é→", max_size=6)
    keys = draw(
        st.lists(
            st.tuples(st.integers(0, len(shapes) - 1), targets, st.integers(-(2**40), 2**40)),
            unique=True,
        )
    )
    results = [
        FrameResult(
            q, target, frame, frame * 10, frame * 10 + 10, draw(st.integers(0, 10)), shapes[q]
        )
        for q, target, frame in keys
    ]
    return queries, results


@settings(max_examples=20, deadline=None)
@given(_runs())
def test_any_results_round_trip_through_memory_and_file(
    run: tuple[tuple[QueryRecord, ...], list[FrameResult]],
) -> None:
    queries, results = run
    memory = InMemoryStore()
    memory.begin(META, TOPOLOGY, queries)
    memory.write_frames(results)
    assert Run.from_memory(memory).results() == _sorted(results)
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "r.duckdb") as store:
        store.begin(META, TOPOLOGY, queries)
        store.write_frames(results)
        store.close()
        with load(Path(tmp) / "r.duckdb") as loaded:
            assert loaded.results() == _sorted(results)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_calibrations_fits_and_raw_records_round_trip(tmp_path: Path, where: str) -> None:
    import numpy as np

    from streamscope.core.tablerows import TableRows
    from streamscope.store.writer import DuckDBStore, InMemoryStore

    store = DuckDBStore(tmp_path / "c.duckdb") if where == "file" else InMemoryStore()
    store.begin(META, TOPOLOGY, QUERIES)
    store.write_table(TableRows(
        "calibration",
        {"domain": ["dev"] * 3, "burst": [0, 0, 0], "t1_ns": np.array([1, 2, 3]),
         "t2_ticks": np.array([10, 20, 30]), "t3_ns": np.array([4, 5, 6])},
    ))  # fmt: skip
    store.write_table(TableRows(
        "record",
        {"probe_id": np.array([1, 2]), "kind": np.array([1, 2]), "ticks": np.array([7, 8]),
         "value": np.array([1, 1])},
    ))  # fmt: skip
    with pytest.raises(ValueError, match="needs columns"):
        store.write_table(TableRows("record", {"probe_id": [1]}))
    with pytest.raises(ValueError, match="one length"):
        TableRows("record", {"probe_id": [1, 2], "kind": [1]})
    store.finish("completed", None, 1, 1)
    if where == "file":
        store.close()
        run = load(tmp_path / "c.duckdb")
    else:
        run = Run.from_memory(store)  # type: ignore[arg-type]
    cal = run.table("calibration")
    assert cal["t2_ticks"].tolist() == [10, 20, 30]
    assert run.table("record")["ticks"].tolist() == [7, 8]
    assert len(run.table("clock_fit")["domain"]) == 0
