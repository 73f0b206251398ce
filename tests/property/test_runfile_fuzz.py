"""Run files with values nobody wrote: every reader gives results or a ``StreamscopeError``.

A real run file (a short monitored pipeline) is copied and one value in one row of one table is
set to something out of its range (NULL where allowed, zero, negative, huge, NaN, empty text);
then the file is loaded and read the ways the commands read it (results, findings, the JSON
document, the timeline the exports draw). Each must succeed or raise a ``StreamscopeError``
that names the file: never a traceback.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import streamscope as ss
from streamscope.analysis.findings import findings
from streamscope.core.errors import StreamscopeError
from streamscope.export.timeline import build_timeline
from streamscope.store.schema import TABLES

QUERIES = [
    "occupancy(src -> work): mean, max, histogram every 50ms",
    "latency(src -> work): p50, max every 50ms",
    "state(*): duty every 50ms",
]
#: Values out of range by column type (and NULL where the schema allows it).
BY_TYPE = {
    "BIGINT": ("0", "-1", "9223372036854775807", "-9223372036854775807"),
    "INTEGER": ("0", "-1", "2147483647", "-2147483647"),
    "DOUBLE": ("'nan'::DOUBLE", "'inf'::DOUBLE", "'-inf'::DOUBLE", "-1", "1e308"),
    "VARCHAR": ("''", "'zz'", "'0'"),
    "BOOLEAN": ("true", "false"),
}


@functools.cache
def run_file() -> Path:
    p = ss.Pipeline("fuzz")
    p.add("src", range(300))
    p.add("work", lambda x: x)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=4)
    out = Path(tempfile.mkdtemp(prefix="ss-fuzz-")) / "r.duckdb"
    res = ss.run(p, QUERIES, ss.RunOptions(frame_ns=50_000_000, out=out, mode="inline"))
    assert res.status == "completed", res.error
    return out


_DAMAGE = [
    (t.name, c.name, v)
    for t in TABLES
    if t.name != "streamscope_meta"
    for c in t.columns
    for v in (*BY_TYPE.get(c.sql.split()[0], ()), *(() if "NOT NULL" in c.sql else ("NULL",)))
]


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(_DAMAGE), st.integers(0, 50))
# Damage that once made a reader raise something else (a sweep of every case found them):
@example(("stat", "point", "'zz'"), 7)
@example(("stat", "point", "''"), 0)
@example(("frame", "t_start_ns", "-9223372036854775807"), 3)
@example(("histogram", "weight", "NULL"), 2)
@example(("probe", "id", "-2147483647"), 0)
def test_a_value_out_of_range_reads_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, damage: tuple[str, str, str], row: int
) -> None:
    table, name, value = damage
    path = tmp_path_factory.mktemp("fuzz") / "r.duckdb"
    shutil.copyfile(run_file(), path)
    with duckdb.connect(str(path)) as con:
        (n,) = con.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
        if not n:
            return
        try:
            con.execute(
                f"UPDATE {table} SET {name} = {value} WHERE rowid = "
                f"(SELECT rowid FROM {table} LIMIT 1 OFFSET {row % n})"
            )
        except duckdb.Error:
            return  # the schema itself refuses it (a type, a NOT NULL, a CHECK)
    said = ""
    try:
        with ss.load(path) as run:
            run.results()
            findings(run)
            run.to_json()
            build_timeline(run)
    except StreamscopeError as e:
        said = str(e)
    assert not said or path.name in said, said  # refused, naming the file
