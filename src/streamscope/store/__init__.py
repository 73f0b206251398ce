"""The run store: the monitor writes a run (``RunStore``); everything after reads it (``load``).

One DuckDB file per run; tables are documented in SCHEMA.md, the JSON document in JSON.md. The
names below are imported when first used (DuckDB is only loaded by what reads or writes files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "STATUSES",
    "DuckDBStore",
    "InMemoryStore",
    "QueryRecord",
    "Run",
    "RunMeta",
    "RunStore",
    "load",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Run": "streamscope.store.run:Run",
        "load": "streamscope.store.reader:load",
        "DuckDBStore": "streamscope.store.writer:DuckDBStore",
        **{n: f"streamscope.store.schema:{n}" for n in ("FORMAT", "SCHEMA_VERSION", "STATUSES")},
        **{
            n: f"streamscope.store.runstore:{n}"
            for n in ("InMemoryStore", "QueryRecord", "RunMeta", "RunStore")
        },
    },
)

if TYPE_CHECKING:
    from streamscope.store.reader import load
    from streamscope.store.run import Run
    from streamscope.store.runstore import InMemoryStore, QueryRecord, RunMeta, RunStore
    from streamscope.store.schema import FORMAT, SCHEMA_VERSION, STATUSES
    from streamscope.store.writer import DuckDBStore
