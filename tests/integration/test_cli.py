"""The ``streamscope`` command end to end, in subprocesses: run → show → show --json → sql, help
texts, and every kind of bad input refused with exit status 2, one message and no traceback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamscope.core.errors import RunFileError
from streamscope.store.reader import load
from streamscope.store.schema import SCHEMA_VERSION

APPS = Path(__file__).parent / "apps"
APP = APPS / "steady.py"
FRAME_NS = 100_000_000
QUERIES = (
    "occupancy(src -> work): mean, max, histogram(bins=0..8)",
    "state(work): duty every 200ms",
    "throughput(work -> sink): mean",
)


def cli() -> list[str]:
    script = Path(sys.executable).with_name("streamscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamscope"]


def streamscope(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli(), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


# -- a good run, read back every way --------------------------------------------------------------


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "steady.duckdb"
    args: list[str | Path] = ["run", APP, "--frame", "100ms", "--out", out]
    for q in QUERIES:
        args += ["--query", q]
    r = streamscope(*args, "--", "--items", "120", "--gap-ms", "2")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert f"run file: {out}" in r.stdout
    assert "summary of steady (completed)" in r.stdout
    return out


def test_run_writes_a_completed_run_file(run_file: Path) -> None:
    with load(run_file) as run:
        assert run.status == "completed"
        assert run.error is None
        assert run.meta.frame_ns == FRAME_NS
        assert run.meta.argv == ("--items", "120", "--gap-ms", "2")
        assert [q.text for q in run.queries] == list(QUERIES)
        assert [s.name for s in run.topology.stages] == ["src", "work", "sink"]
        for q in run.queries:
            for target in q.targets:
                assert run.results(q.id, target), (q.text, target)


def test_show_prints_status_pipeline_and_frames(run_file: Path) -> None:
    r = streamscope("show", run_file)
    assert r.returncode == 0, r.stderr
    assert "status=completed" in r.stdout
    assert "src -> work" in r.stdout
    assert "work -> sink" in r.stdout
    for q in QUERIES:
        assert f"q{QUERIES.index(q)}:" in r.stdout
    assert "summary of steady" in r.stdout


def test_show_last_limits_the_frames(run_file: Path) -> None:
    r = streamscope("show", run_file, "--last", "1")
    assert r.returncode == 0, r.stderr
    with load(run_file) as run:
        frames = [f.frame for f in run.results(0)]
    assert len(frames) >= 2
    body = r.stdout.split("q0:", 1)[1].split("q1:", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("│") and "src -> work" in line]
    assert len(rows) == 1, body
    assert rows[0].split()[1] == str(frames[-1])
    with load(run_file) as run:
        last = run.results(0)[-1]
    if last.covered_ns < last.t_end_ns - last.t_start_ns:  # the run ended inside it
        assert "(partial:" in rows[0], rows[0]
    else:
        assert "(partial:" not in rows[0], rows[0]


def test_show_json_is_the_documented_document(run_file: Path) -> None:
    r = streamscope("show", run_file, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {
        "format",
        "schema_version",
        "run",
        "resources",
        "stages",
        "channels",
        "probes",
        "queries",
        "virtual_queues",
        "drops",
        "overhead",
        "monitor",
        "profiles",
        "trace_exclusions",
        "notes",
        "findings",
        "whatif",
        "stacks",
    }
    assert doc["format"] == "streamscope-run"
    assert doc["schema_version"] == SCHEMA_VERSION
    run = doc["run"]
    assert run["status"] == "completed"
    assert run["error"] is None
    assert run["name"] == run["pipeline"] == "steady"
    assert run["frame_ns"] == FRAME_NS
    assert run["argv"] == ["--items", "120", "--gap-ms", "2"]
    assert run["duration_ns"] > 0
    assert run["ended_unix_ns"] >= run["started_unix_ns"]
    assert [s["name"] for s in doc["stages"]] == ["src", "work", "sink"]
    assert {c["name"]: c["capacity"] for c in doc["channels"]} == {
        "src -> work": 8,
        "work -> sink": 8,
    }
    assert [q["text"] for q in doc["queries"]] == list(QUERIES)
    for q in doc["queries"]:
        assert set(q) >= {"id", "text", "metric", "unit", "frame_ns", "stats", "targets"}
        for t in q["targets"]:
            frames = t["frames"]
            assert frames, (q["text"], t["target"])
            assert [f["frame"] for f in frames] == list(range(len(frames)))
            for f in frames:
                assert set(f) == {
                    "frame",
                    "t_start_ns",
                    "t_end_ns",
                    "covered_ns",
                    "stats",
                    "histogram",
                    "duty",
                }
                assert f["t_start_ns"] == f["frame"] * q["frame_ns"]
                assert 0 < f["covered_ns"] <= f["t_end_ns"] - f["t_start_ns"]
            assert sum(f["covered_ns"] for f in frames) == pytest.approx(
                run["duration_ns"], abs=1_000
            )

    occupancy, state, throughput = doc["queries"]
    assert occupancy["metric"] == "occupancy"
    assert occupancy["stats"] == ["mean", "max", "histogram"]
    for f in occupancy["targets"][0]["frames"]:
        h = f["histogram"]
        assert h["edges"] == [float(k) for k in range(10)]  # bins 0..8, one per level
        assert len(h["weights"]) == len(h["edges"]) - 1
        assert all(w >= 0 for w in h["weights"])
        # Occupancy histograms weigh each level by the time spent at it: they add up to the frame.
        assert sum(h["weights"]) + h["under"] + h["over"] == pytest.approx(f["covered_ns"])
        assert 0 <= f["stats"]["mean"] <= f["stats"]["max"] <= 8
    assert state["frame_ns"] == 2 * FRAME_NS
    for f in state["targets"][0]["frames"]:
        assert set(f["duty"]) == {"idle", "busy", "blocked_in", "blocked_out"}
        assert sum(f["duty"].values()) == pytest.approx(1.0)
    assert sum(f["stats"]["mean"] or 0 for f in throughput["targets"][0]["frames"]) > 0
    assert {d["kind"] for d in doc["drops"]} <= {"tail", "head", "state", "stacks"}
    assert all(d["dropped"] == 0 for d in doc["drops"])


def test_sql_counts_frames_in_every_format(run_file: Path) -> None:
    with load(run_file) as run:
        expected = {q.id: len(run.results(q.id)) for q in run.queries}
    query = "SELECT query_id, count(*) AS frames FROM frame GROUP BY query_id ORDER BY query_id"

    as_csv = streamscope("sql", run_file, query, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0] == ["query_id", "frames"]
    assert {int(a): int(b) for a, b in rows[1:]} == expected

    as_json = streamscope("sql", run_file, query, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [
        {"query_id": k, "frames": v} for k, v in sorted(expected.items())
    ]

    as_table = streamscope("sql", run_file, "SELECT status FROM run")
    assert as_table.returncode == 0, as_table.stderr
    assert "completed" in as_table.stdout


def test_sql_refuses_bad_sql_and_formats(run_file: Path) -> None:
    bad_sql = streamscope("sql", run_file, "SELEC nonsense")
    assert bad_sql.returncode == 2
    assert "Traceback" not in bad_sql.stderr
    assert bad_sql.stderr.startswith("streamscope: error:")
    bad_format = streamscope("sql", run_file, "SELECT 1", "--format", "xml")
    assert bad_format.returncode == 2
    assert "Traceback" not in bad_format.stderr
    assert "xml" in bad_format.stderr
    assert "csv" in bad_format.stderr


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        "COPY run TO '{tmp}/out.csv'",
        "ATTACH '{tmp}/other.duckdb'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "",
        "   ",
    ],
)
def test_sql_reaches_nothing_outside_the_run(run_file: Path, tmp_path: Path, query: str) -> None:
    refused(streamscope("sql", run_file, query.format(tmp=tmp_path)))
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_sql_json_is_strict_json_for_every_kind_of_value(run_file: Path) -> None:
    query = (
        "SELECT 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, -1.5 AS num, "
        "TIMESTAMPTZ '2026-01-02 03:04:05+00' AS tz, TIMESTAMP '2026-01-02 03:04:05' AS ts, "
        "DATE '2026-01-02' AS d, INTERVAL 90 SECOND AS iv, 'ab'::BLOB AS b, "
        "[1.0, 'nan'::DOUBLE] AS l, {'k': 'inf'::DOUBLE} AS st, 12.25::DECIMAL(6, 2) AS dec, "
        "uuid() IS NOT NULL AS has_uuid, started_unix_ns FROM run"
    )
    proc = streamscope("sql", run_file, query, "--format", "json")
    assert proc.returncode == 0, proc.stderr

    def refuse(token: str) -> None:
        raise AssertionError(f"not JSON: {token}")

    (row,) = json.loads(proc.stdout, parse_constant=refuse)
    assert row["nan"] is None and row["inf"] is None and row["num"] == -1.5
    assert row["tz"].startswith("2026-01-02T03:04:05") and row["ts"] == "2026-01-02T03:04:05"
    assert row["d"] == "2026-01-02" and row["iv"] == "P0DT90S" and row["b"] == "YWI="
    assert row["l"] == [1.0, None] and row["st"] == {"k": None} and row["dec"] == 12.25
    assert row["has_uuid"] is True and isinstance(row["started_unix_ns"], int)
    table = streamscope("sql", run_file, query)  # and the table shows them, no traceback
    assert table.returncode == 0, table.stderr


def test_queries_file_with_comments(tmp_path: Path) -> None:
    qfile = tmp_path / "queries.txt"
    qfile.write_text(
        "# what the server does\n"
        "\n"
        "occupancy(src -> work): mean, max every 100ms   # trailing comment\n"
        "   # an indented comment\n"
        "state(work): duty\n"
    )
    out = tmp_path / "q.duckdb"
    r = streamscope(
        "run",
        APP,
        "--queries",
        qfile,
        "--frame",
        "100ms",
        "--out",
        out,
        "--quiet",
        "--",
        "--items",
        "30",
    )
    assert r.returncode == 0, r.stderr
    with load(out) as run:
        assert run.status == "completed"
        texts = [q.text for q in run.queries]
        assert len(texts) == 2
        assert texts[0].startswith("occupancy(src -> work): mean, max")
        assert texts[1].startswith("state(work): duty")
        assert "#" not in "".join(texts)
        assert all(run.results(q.id) for q in run.queries)


def test_default_queries_come_from_the_app(tmp_path: Path) -> None:
    out = tmp_path / "d.duckdb"
    r = streamscope("run", APP, "--out", out, "--quiet", "--", "--items", "10")
    assert r.returncode == 0, r.stderr
    with load(out) as run:
        assert [q.text for q in run.queries] == ["occupancy(src -> work): mean, max every 100ms"]


def test_overwrite_replaces_an_existing_run_file(tmp_path: Path) -> None:
    out = tmp_path / "again.duckdb"
    out.write_text("an old file\n")
    r = streamscope("run", APP, "--out", out, "--overwrite", "--quiet", "--", "--items", "10")
    assert r.returncode == 0, r.stderr
    with load(out) as run:
        assert run.status == "completed"


@pytest.mark.parametrize("command", [[], ["run"], ["show"], ["sql"]])
def test_help_describes_every_command(command: list[str]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "streamscope", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout
    words = {
        (): ["run", "show", "sql", "Monitor streaming pipelines"],
        ("run",): ["APP", "--query", "--queries", "--frame", "--out", "--overwrite", "Exit status"],
        ("show",): ["RUN", "--json", "--last"],
        ("sql",): ["RUN", "--format", "SQL"],
    }[tuple(command)]
    for w in words:
        assert w in r.stdout, (w, r.stdout)
    short = subprocess.run([sys.executable, "-m", "streamscope", *command, "-h"],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (short.returncode, short.stdout) == (0, r.stdout)


def test_version_is_printed_and_nothing_else() -> None:
    from streamscope import __version__

    r = subprocess.run([sys.executable, "-m", "streamscope", "--version"],
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (r.returncode, r.stdout, r.stderr) == (0, f"streamscope {__version__}\n", "")


# -- bad input ------------------------------------------------------------------------------------


def refused(r: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit status 2, a short message naming what was wrong, no traceback, nothing else run."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("streamscope: error: "), r.stderr
    assert len(r.stderr.splitlines()) <= 4, r.stderr  # message, and the query line with a caret
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert "summary of" not in r.stdout


@pytest.mark.parametrize(
    ("query", "words"),
    [
        pytest.param(
            "occupancy(src -> nope): mean",
            ["unknown stage 'nope'", "known stages: src, work, sink", ":1:18:"],
            id="unknown-stage",
        ),
        pytest.param(
            "state(bogus): duty", ["'bogus'", "src, work, sink"], id="unknown-state-stage"
        ),
        pytest.param(
            "occupancy(src -> work: mean", ["--query #1:1:22:", "expected ')'"], id="syntax"
        ),
        pytest.param(
            "occupancy(src -> work): mean every", ["--query #1:1:35:", "duration"], id="no-duration"
        ),
        pytest.param(
            "occupancy(src -> sink): mean",
            ["no channel from 'src' to 'sink'", "src -> work, work -> sink"],
            id="no-such-channel",
        ),
    ],
)
def test_an_invalid_query_runs_nothing(tmp_path: Path, query: str, words: list[str]) -> None:
    marker = tmp_path / "started"
    out = tmp_path / "never.duckdb"
    r = streamscope("run", APP, "--query", query, "--out", out, "--", "--marker", marker)
    refused(r, *words)
    assert not marker.exists(), "the app's source started although a query was invalid"
    assert not out.exists()


def test_an_error_in_a_queries_file_names_its_line(tmp_path: Path) -> None:
    qfile = tmp_path / "queries.txt"
    qfile.write_text("# fine so far\nstate(work): duty\noccupancy(src -> work: mean\n")
    marker = tmp_path / "started"
    r = streamscope(
        "run", APP, "--queries", qfile, "--out", tmp_path / "x.duckdb", "--", "--marker", marker
    )
    refused(r, f"{qfile}:3:22:", "expected ')'")
    assert not marker.exists()


@pytest.mark.parametrize("frame", ["10parsecs", "-1s", "0ms", "fast"])
def test_a_bad_frame_duration(tmp_path: Path, frame: str) -> None:
    marker = tmp_path / "started"
    r = streamscope(
        "run", APP, f"--frame={frame}", "--out", tmp_path / "x.duckdb", "--", "--marker", marker
    )
    refused(r, "--frame", repr(frame))
    assert not marker.exists()


def test_a_missing_app_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "app.py"
    refused(
        streamscope("run", missing, "--out", tmp_path / "x.duckdb"), str(missing), "does not exist"
    )


def test_an_app_file_without_a_pipeline(tmp_path: Path) -> None:
    app = tmp_path / "nopipe.py"
    app.write_text("QUERIES = ['state(a): duty']\n")
    refused(
        streamscope("run", app, "--out", tmp_path / "x.duckdb"),
        str(app),
        "no pipeline",
        "def pipeline(argv",
    )


def test_an_unwritable_output_path(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    out = tmp_path / "no" / "such" / "dir" / "run.duckdb"
    r = streamscope("run", APP, "--out", out, "--", "--marker", marker)
    refused(r, str(out), "does not exist")
    assert not marker.exists()


def test_an_existing_output_file_needs_overwrite(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    out = tmp_path / "taken.duckdb"
    out.write_text("precious\n")
    r = streamscope("run", APP, "--out", out, "--", "--marker", marker)
    refused(r, str(out), "--overwrite")
    assert not marker.exists()
    assert out.read_text() == "precious\n"


@pytest.mark.parametrize("command", ["show", "sql"])
def test_reading_what_is_not_a_run_file(tmp_path: Path, command: str) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    extra = ["SELECT 1"] if command == "sql" else []
    refused(streamscope(command, text, *extra), str(text), "not a streamscope run file")
    missing = tmp_path / "missing.duckdb"
    refused(streamscope(command, missing, *extra), str(missing), "does not exist")
    refused(streamscope(command, tmp_path, *extra), str(tmp_path), "directory")


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (  # an app (it defines pipeline) that breaks before it gets there
            "x = undefined_name\ndef pipeline(argv):\n    pass\n",
            "could not be loaded: NameError: name 'undefined_name' is not defined (at",
        ),
        (
            "def pipeline(argv):\n    return {}['missing']\n",
            "pipeline(argv) raised KeyError: 'missing' (at",
        ),
    ],
)
def test_an_app_that_breaks_while_loading_gets_a_clear_error(
    tmp_path: Path, body: str, expect: str
) -> None:
    app = tmp_path / "broken.py"
    app.write_text("import streamscope\n" + body)
    proc = streamscope("run", app, "-q", "state(a): duty", "-o", tmp_path / "r.duckdb")
    assert proc.returncode == 2
    assert expect in proc.stderr
    assert "broken.py:" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.duckdb").exists()


#: Damage a copy of a run file as a careless tool or hand could (DuckDB SQL on the copy).
DAMAGE = {
    "renamed": "ALTER TABLE frame RENAME COLUMN frame TO frame_no",
    "retyped": "ALTER TABLE stat ALTER COLUMN value TYPE VARCHAR",
    "nullable": "ALTER TABLE frame ALTER COLUMN t_end_ns DROP NOT NULL",
    "dropped": "ALTER TABLE histogram DROP COLUMN weight",
    "frame_ns": "UPDATE run SET frame_ns = 0",
}


def damaged(run_file: Path, tmp_path: Path, how: str) -> Path:
    import duckdb

    copy = tmp_path / f"{how}.duckdb"
    copy.write_bytes(run_file.read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute(DAMAGE[how])
    return copy


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_run_file_is_refused_naming_what_is_wrong(
    run_file: Path, tmp_path: Path, how: str
) -> None:
    bad = damaged(run_file, tmp_path, how)
    with pytest.raises(RunFileError, match=f"{bad.name} is not a streamscope run file: "):
        load(bad)


@pytest.mark.parametrize(
    "command",
    [
        ["show"], ["show", "--json"], ["sql", "{bad}", "SELECT 1"], ["report", "-o", "{tmp}/r.html"],
        ["export", "--format", "perfetto", "-o", "{tmp}/t.pftrace"],
        ["export", "--format", "otf2", "-o", "{tmp}/otf2"], ["compare", "{good}"], ["retime"],
    ],
)  # fmt: skip
def test_every_command_refuses_a_retyped_column_in_one_line(
    run_file: Path, tmp_path: Path, command: list[str]
) -> None:
    bad = damaged(run_file, tmp_path, "retyped")
    args = [a.format(bad=bad, tmp=tmp_path, good=run_file) for a in command]
    if "{bad}" not in command:
        args.insert(1, str(bad))
    refused(streamscope(*args), bad.name, "column stat.value is VARCHAR, expected DOUBLE")
