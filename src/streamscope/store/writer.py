"""The run file writer: ``DuckDBStore`` writes one run, each call a durable transaction.

In: what the monitor writes through ``RunStore`` (``store/runstore.py``, whose names are
re-exported here). Out: one DuckDB run file that opens with every call that returned, even
after its writer was killed or its disk filled; ``replace_results`` for ``retime``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.closing import Closing
from streamscope.core.errors import RunFileError
from streamscope.core.tablerows import Column
from streamscope.core.topology import Topology
from streamscope.store import _rows
from streamscope.store.lock import WriterLock
from streamscope.store.private import make_private, match_mode
from streamscope.store.retention import Retention
from streamscope.store.runstore import (
    APPEND_TABLES,
    ENDED_STATUSES,
    BaseStore,
    InMemoryStore,
    QueryRecord,
    RunMeta,
    RunStore,
)

if TYPE_CHECKING:
    from types import ModuleType

    import duckdb

    from streamscope.store.run import Run


def _duckdb() -> ModuleType:
    """DuckDB, loaded by what writes a file (an application that only runs never needs it)."""
    from streamscope.store.duck import duckdb

    return duckdb


def _sqlio() -> ModuleType:
    from streamscope.store import _sqlio as sqlio

    return sqlio


#: With ``--keep``, the file's connection is opened afresh after this many roll-ups, right
#: after a write that folded the log into the file (nothing to replay): DuckDB keeps some of
#: what each roll-up's deletes leave in its own memory (not in the file) until the file is
#: opened again, some 0.1 MB a roll-up at 10 ms frames, so a run watched for days would grow
#: without end. A reopening costs a few milliseconds.
REOPEN_ROLLS = 16


class DuckDBStore(BaseStore, Closing):
    """Writes one run file at ``path``; an existing file is refused unless ``overwrite``.

    Every ``begin``/``write_*``/``finish`` call is one transaction, committed (to the write-ahead
    log, ``path.wal``) before it returns, so a killed writer leaves a file that opens with every
    call that returned. Every ``checkpoint_every``-th write (0: none), or with ``checkpoint_s``
    the first write that many seconds after the last fold, and ``begin``/``finish`` also fold
    the log into the file itself (~15-35 ms each), so the file alone is complete.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        overwrite: bool = False,
        checkpoint_every: int = 1,
        checkpoint_s: float | None = None,
        lock: WriterLock | None = None,
        keep_ns: int | None = None,
    ) -> None:
        self.path = Path(path)
        #: ``--keep``: frames older than this (ns) are rolled up as the run goes (None: kept
        #: whole); the roll-ups themselves, once the run's frame lengths are known (``begin``).
        self.keep_ns = keep_ns
        self._retention: Retention | None = None
        #: One writer per file (store/lock.py): given when the caller took it already (the run's
        #: launcher, before the application starts), else taken by ``begin``.
        self._lock = lock
        self.overwrite = overwrite
        self.checkpoint_every = checkpoint_every
        #: When set, a write folds the log into the file only if this many seconds passed since
        #: the last fold (``checkpoint_every`` is then unused): a monitor writing many small
        #: frames spends its time reducing, not checkpointing.
        self.checkpoint_s = checkpoint_s
        self._last_checkpoint = time.monotonic()
        self._writes = 0
        #: Roll-ups since the connection was opened (``REOPEN_ROLLS``).
        self._rolls = 0
        self._con: duckdb.DuckDBPyConnection | None = None
        #: The file was made from the empty run file kept once per schema (its tables made).
        self._copied = False
        #: The connection failed (a full disk): ``finish`` reopens the file to say so.
        self._broken = False
        #: Rows of each topology table written so far (the run grows by appending to them).
        self._written: dict[str, int] = {}
        self._refuse_existing()

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):  # a connection a full disk broke
                self._con.close()
            self._con = None
        reserve_path(self.path).unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        super().close()

    def written(self) -> Run:
        """The run this store wrote, read back through its own connection (as ``load``
        would read its file, without opening it again) until the store is closed."""
        from streamscope.store.reader import read_written

        if self._con is None:
            raise RunFileError(f"{self.path} is not open for writing")
        return read_written(self.path, self._con)

    def _refuse_existing(self) -> None:
        if self.path.is_dir():
            raise RunFileError(f"{self.path} is a directory; give a file path for the run")
        if self.path.exists() and not self.overwrite:
            raise RunFileError(
                f"{self.path} already exists; choose another path, or pass overwrite=True to replace it"
            )

    def open(self) -> None:
        """Make the run file, empty (its tables and no row), and connect to it: ``begin`` does
        it first where this was not called. A monitor process does it while it loads its own
        modules, so that ``begin`` only writes the run's rows once the run starts."""
        if self._con is not None:
            return
        if self._lock is None:
            self._lock = WriterLock(self.path).acquire()
        self._refuse_existing()
        for p in (self.path, _wal(self.path)):
            p.unlink(missing_ok=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            _reserve(self.path)
            from streamscope.store._template import copy_into

            # made private before a byte of the run is in it (it will hold the command line)
            mode = make_private(self.path)
            self._copied = copy_into(self.path)  # the tables made once per schema, not per run
            self._con = _duckdb().connect(str(self.path))
            if not self._copied:  # DuckDB made the file anew: private before any row is in it
                os.chmod(self.path, mode)
        except BaseException as exc:
            self._undo(exc)
            raise

    def _undo(self, exc: BaseException) -> None:
        """A run file that could not be begun: closed and removed; a full disk said plainly."""
        self.close()
        self.path.unlink(missing_ok=True)
        _wal(self.path).unlink(missing_ok=True)
        if _no_space(exc):
            raise RunFileError(_full(self.path, exc)) from None

    def _do_begin(
        self, meta: RunMeta, topology: Topology, queries: tuple[QueryRecord, ...]
    ) -> None:
        self.open()
        try:
            with self._transaction() as con:
                _sqlio().create(con, meta, topology, queries, tables=not self._copied)
            self._written = _sqlio().topology_counts(topology)
            if self.keep_ns is not None:
                lengths = {q.id: q.frame_ns for q in queries}
                self._retention = Retention(self.keep_ns, lengths, meta.frame_ns)
        except BaseException as exc:
            self._undo(exc)
            raise

    def _do_write(self, rows: _rows.Rows | None, drops: Sequence[DropCount]) -> None:
        self._do_batch(rows, drops, ())

    def _do_batch(
        self,
        rows: _rows.Rows | None,
        drops: Sequence[DropCount],
        tables: Sequence[tuple[str, list[Column]]],
    ) -> None:
        self._writes += 1
        every = self.checkpoint_every
        if self.checkpoint_s is not None:
            now = time.monotonic()
            fold = now - self._last_checkpoint >= self.checkpoint_s
            if fold:
                self._last_checkpoint = now
        else:
            fold = every > 0 and self._writes % every == 0
        with self._transaction(checkpoint=fold) as con:
            if rows is not None:
                _sqlio().insert(con, "frame", rows.frame)
                _sqlio().insert(con, "stat", rows.stat)
                _sqlio().insert(con, "histogram", rows.hist)
            if drops:
                cols = [[getattr(d, c) for d in drops] for c in _rows.DROP_COLUMNS]
                _sqlio().insert(con, "drops", cols)
            for table, columns in tables:
                _sqlio().insert(con, table, columns)
            kept = self._retention
            if kept is not None and rows is not None and rows.frame[4]:
                now = max(rows.frame[4])
                if kept.due(now):
                    kept.roll(con, now)
                    self._rolls += 1
        if fold and self._rolls >= REOPEN_ROLLS:
            self._reopen()

    def _reopen(self) -> None:
        """The file's connection closed and opened again (``REOPEN_ROLLS``); a file that
        cannot be opened again is broken, as a full disk leaves it (``finish`` retries)."""
        assert self._con is not None
        self._rolls = 0
        try:
            self._con.close()
            self._con = _duckdb().connect(str(self.path))
        except Exception as e:
            self._broken = True
            raise self._failed(e) from None

    def _do_table(self, table: str, columns: list[Column]) -> None:
        with self._transaction(checkpoint=False) as con:
            _sqlio().insert(con, table, columns)

    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...] | None) -> None:
        with self._transaction(checkpoint=False) as con:
            _sqlio().append_topology(con, self._written, topology, queries)
        if self._retention is not None and queries is not None:
            self._retention.frame_ns.update({q.id: q.frame_ns for q in queries})
        self._written = _sqlio().topology_counts(topology)

    def _do_finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None:
        if self._broken:
            # A full disk broke the connection: the reserve makes room to reopen the file (its
            # log replayed: every write that returned is there) and say how the run ended.
            reserve_path(self.path).unlink(missing_ok=True)
            with contextlib.suppress(Exception):
                assert self._con is not None
                self._con.close()
            self._con = _duckdb().connect(str(self.path))
            self._broken = False
            # The run's length is what the file holds: up to its last frame written.
            row = self._con.execute("SELECT coalesce(max(t_end_ns), 0) FROM frame").fetchone()
            duration_ns = min(duration_ns, int(row[0]) if row else 0)
        if self._retention is not None and not self._broken:
            # the last stretch rolled as the run's end leaves it; a failure here must not cost
            # the run its status (the frames are all there, only finer than asked)
            with contextlib.suppress(Exception), self._transaction(checkpoint=False) as con:
                self._retention.roll(con, duration_ns)
        with self._transaction() as con:
            _sqlio().set_status(con, status, error, ended_unix_ns, duration_ns)

    def _transaction(self, *, checkpoint: bool = True) -> _Transaction:
        assert self._con is not None
        return _Transaction(self._con, checkpoint, self)

    def _failed(self, exc: BaseException) -> BaseException:
        """What a failed write raises: a full disk said plainly (and the connection marked
        broken, for ``finish``), anything else as it came."""
        if _no_space(exc):
            self._broken = True
            return RunFileError(_full(self.path, exc))
        return exc


class _Transaction:
    """BEGIN … COMMIT, then CHECKPOINT if asked (folds the WAL into the file); ROLLBACK on error."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, checkpoint: bool, store: DuckDBStore | None = None
    ) -> None:
        self.con = con
        self.checkpoint = checkpoint
        self.store = store

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        self.con.execute("BEGIN TRANSACTION")
        return self.con

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            with contextlib.suppress(Exception):  # a broken connection cannot roll back
                self.con.execute("ROLLBACK")
            failed = self._failed(exc)
            if failed is not exc:
                raise failed from None
            return
        try:
            self.con.execute("COMMIT")
            if self.checkpoint:
                self.con.execute("CHECKPOINT")
        except Exception as e:
            raise self._failed(e) from None
        if not self.checkpoint and self.store is not None:
            # DuckDB's log, made with the process's umask: the monitor's keeps it private, a
            # program's (``--inline``) may not
            match_mode(_wal(self.store.path), self.store.path)

    def _failed(self, exc: BaseException) -> BaseException:
        if self.store is not None:
            return self.store._failed(exc)
        return exc


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


#: Space held beside a run file while it is written, given back when the disk fills so the file
#: can still be finished (its status and cause written, its log folded in).
RESERVE_BYTES = 4 << 20


def reserve_path(path: Path) -> Path:
    return path.with_name(path.name + ".reserve")


def _reserve(path: Path) -> None:
    fd = os.open(reserve_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError as e:
        os.close(fd)
        reserve_path(path).unlink(missing_ok=True)
        raise RunFileError(_full(path, e)) from None
    os.close(fd)


def _no_space(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left" in text or "Disk quota exceeded" in text


def _full(path: Path, exc: BaseException) -> str:
    return f"the disk holding {path} is full ({str(exc).splitlines()[0][:200]})"


def replace_results(
    path: str | Path, keys: Sequence[tuple[int, str]], results: Sequence[FrameResult]
) -> None:
    """Swap the frames of the ``(query_id, target)`` pairs in ``keys`` for ``results``, in one
    transaction (``retime`` does this after re-converting a run's times)."""
    p = Path(path)
    if not p.is_file():
        raise RunFileError(f"{p} does not exist")
    con = _duckdb().connect(str(p))
    try:
        with _Transaction(con, True) as c:
            for qid, target in keys:
                for table in ("frame", "stat", "histogram"):
                    sql = f"DELETE FROM {table} WHERE query_id = ? AND target = ?"  # noqa: S608
                    c.execute(sql, [qid, target])
            if results:
                rows = _rows.flatten(results)
                _sqlio().insert(c, "frame", rows.frame)
                _sqlio().insert(c, "stat", rows.stat)
                _sqlio().insert(c, "histogram", rows.hist)
    finally:
        con.close()


__all__ = [
    "APPEND_TABLES",
    "ENDED_STATUSES",
    "RESERVE_BYTES",
    "BaseStore",
    "DuckDBStore",
    "InMemoryStore",
    "QueryRecord",
    "RunMeta",
    "RunStore",
    "replace_results",
    "reserve_path",
]
