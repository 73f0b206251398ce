"""One table of a run file as declared: its documented columns, rendered to DDL and markdown.

In: a table's name, what one row means, and its columns (DuckDB type and one line each). Out:
the statements that create it with its documentation (``COMMENT ON``), so ``duckdb_columns()``
shows it too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Column:
    """One column: ``sql`` is its DuckDB type (with constraints), ``doc`` one line for users."""

    name: str
    sql: str
    doc: str


@dataclass(frozen=True, slots=True)
class Table:
    """One table of a run file, with what one row means."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> list[str]:
        """CREATE TABLE followed by one COMMENT ON per column."""
        cols = ",\n  ".join(f"{c.name} {c.sql}" for c in self.columns)
        out = [f"CREATE TABLE {self.name} (\n  {cols}\n)", _comment("TABLE", self.name, self.doc)]
        out += [_comment("COLUMN", f"{self.name}.{c.name}", c.doc) for c in self.columns]
        return out


def _comment(kind: str, what: str, doc: str) -> str:
    return f"COMMENT ON {kind} {what} IS '{doc.replace(chr(39), chr(39) * 2)}'"


#: The columns every results table starts with: which query, which target, which frame.
KEY_COLUMNS = (
    Column("query_id", "INTEGER NOT NULL", "the query (query.id)"),
    Column("target", "VARCHAR NOT NULL", "the channel or stage name the query measured"),
    Column("frame", "BIGINT NOT NULL", "frame number, 0 at the run's start (frame.frame)"),
)

__all__ = ["KEY_COLUMNS", "Column", "Table"]
