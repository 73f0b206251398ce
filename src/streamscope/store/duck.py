"""DuckDB as streamscope loads it: the engine's compiled module alone.

``import duckdb`` loads, beside the compiled engine (``_duckdb``, whose ``connect``, connection
class, errors and version it re-exports as they are), the package's Python API: relations,
expressions, its version read through ``importlib.metadata``. That is 60-90 ms that nothing of
streamscope uses, a quarter of ``streamscope show`` and of a short run's monitor start. Where
the engine's module is not there as such (another build or layout of the package), the package
is loaded whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
else:
    try:
        import _duckdb as duckdb

        # what streamscope uses of it, or the package
        duckdb.connect, duckdb.Error, duckdb.DuckDBPyConnection, duckdb.__version__  # noqa: B018
    except (ImportError, AttributeError):
        import duckdb

__all__ = ["duckdb"]
