"""The run store: the monitor writes a run (``RunStore``); everything after reads it (``load``).

One DuckDB file per run; tables are documented in SCHEMA.md, the JSON document in JSON.md.
"""

from __future__ import annotations

from streamscope.store.reader import Run, load
from streamscope.store.schema import FORMAT, SCHEMA_VERSION, STATUSES
from streamscope.store.writer import DuckDBStore, InMemoryStore, QueryRecord, RunMeta, RunStore

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
