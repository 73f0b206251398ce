"""An empty run file with every table made, kept once per schema, copied for each new run.

In: a new run file's path. Out: that file holding every table and its documentation and no row
(True), or nothing done (False: the caller makes the tables itself). Making a run file's ~300
statements of tables and comments takes 70-140 ms, most of what a short run's monitor spends
after the program has ended, and of every run file a test suite makes; copying a file made once
takes a millisecond. The copy is kept in streamscope's cache directory, named after what made it
(the statements and DuckDB's version): a schema or a DuckDB that changes makes another. It is
made under a name of its own and renamed whole, so processes making it at once never see one
half made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from streamscope.core.config import CACHE_DIR
from streamscope.store.duck import duckdb
from streamscope.store.schema import ddl


def template_path() -> Path:
    """Where this schema's empty run file is kept (``core.config.CACHE_DIR``)."""
    key = hashlib.sha256("\n".join([duckdb.__version__, *ddl()]).encode()).hexdigest()[:20]
    return CACHE_DIR / f"run-schema-{key}.duckdb"


def _make(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".making-", suffix=".duckdb")
    os.close(fd)
    os.unlink(tmp)  # DuckDB makes its file itself
    try:
        con = duckdb.connect(tmp)
        try:
            con.execute("BEGIN")
            for stmt in ddl():
                con.execute(stmt)
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp + ".wal")


def copy_into(target: Path) -> bool:
    """Make ``target`` (absent, or empty: its mode is kept) a copy of this schema's empty run
    file, made first if there is none; False when none can be kept or copied (a read-only
    home, a full disk): nothing of ``target`` is left then."""
    path = template_path()
    try:
        if not path.is_file():
            _make(path)
        shutil.copyfile(path, target)
        return True
    except (OSError, duckdb.Error):
        with contextlib.suppress(OSError):
            target.unlink(missing_ok=True)
        return False


__all__ = ["copy_into", "template_path"]
