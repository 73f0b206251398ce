"""A new run file is a copy of an empty one made once per schema: the same tables and
documentation as one made table by table, and made table by table where no copy can be kept."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_store import _write

from streamscope.store import DuckDBStore, _template, load
from streamscope.store.schema import TABLES


def _columns(path: Path) -> list[tuple[str, str, str, str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(
            "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
            "ORDER BY table_name, column_index"
        ).fetchall()


def test_a_run_file_is_a_copy_of_one_made_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_template, "CACHE_DIR", tmp_path / "cache")
    template = _template.template_path()
    assert not template.exists()
    _write(DuckDBStore(tmp_path / "a.duckdb"))
    assert template.is_file()  # made by the first run file, kept for the next
    made = template.stat().st_mtime_ns
    _write(DuckDBStore(tmp_path / "b.duckdb"))
    assert template.stat().st_mtime_ns == made  # copied, not made again
    assert [p.name for p in template.parent.iterdir()] == [template.name]  # nothing half made
    # where nothing can be kept (the cache is a file), the tables are made one by one
    (tmp_path / "nocache").write_text("")
    monkeypatch.setattr(_template, "CACHE_DIR", tmp_path / "nocache")
    _write(DuckDBStore(tmp_path / "c.duckdb"))
    copied, made_here = _columns(tmp_path / "b.duckdb"), _columns(tmp_path / "c.duckdb")
    assert copied == made_here
    assert {t for t, *_ in copied} >= {t.name for t in TABLES}
    with load(tmp_path / "b.duckdb") as run, load(tmp_path / "c.duckdb") as other:
        assert run.status == other.status == "completed"
        assert run.topology == other.topology
