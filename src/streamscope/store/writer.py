"""The run store: what the monitor writes (run metadata, topology, queries, frames, drops).

``DuckDBStore`` writes one run file, each call a durable transaction; ``InMemoryStore`` keeps lists.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.errors import RunFileError
from streamscope.core.topology import Topology
from streamscope.store import _rows
from streamscope.store.lock import WriterLock
from streamscope.store.schema import STATUSES, TABLES

if TYPE_CHECKING:
    from types import ModuleType

    import duckdb


def _duckdb() -> ModuleType:
    """DuckDB, loaded by what writes a file (an application that only runs never needs it)."""
    import duckdb

    return duckdb


def _sqlio() -> ModuleType:
    from streamscope.store import _sqlio as sqlio

    return sqlio


#: Tables a run appends to besides frames: calibrations, fits and raw records of clock domains.
_APPENDED = (
    "calibration", "clock_fit", "clock_truth", "flight", "worker", "stall", "record", "vq_frame",
    "vq_level", "virtual_queue", "overhead", "profile", "trace_exclusion", "monitor", "runner",
)  # fmt: skip
APPEND_TABLES = {t.name: t for t in TABLES if t.name in _APPENDED}

ENDED_STATUSES = tuple(s for s in STATUSES if s != "running")


@dataclass(frozen=True, slots=True)
class RunMeta:
    """What is known about a run when it starts. Times are ns since the Unix epoch."""

    run_id: str
    name: str
    app: str
    command: str
    argv: tuple[str, ...]
    host: str
    started_unix_ns: int
    frame_ns: int
    version: str
    #: The run's virtual time zero as a reading of the host's monotonic clock (ns): frame times
    #: are relative to it, so an application's own monotonic timestamps can be aligned with them.
    t0_host_ns: int = 0
    #: Which probe core recorded the run: ``native`` (the C extension) or ``python`` (its twin).
    probe_core: str = ""


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """One compiled query. ``stats`` names its aggregations in order; every frame's points
    follow that order (``mean``, ``max``, ``quantiles``, ``histogram``, ``duty``...)."""

    id: int
    text: str
    metric: str
    unit: str
    frame_ns: int
    targets: tuple[str, ...]
    stats: tuple[str, ...]


class RunStore(Protocol):
    """Where the monitor puts a run. Call order: begin, any writes, finish, close.

    A writer that dies after ``begin`` leaves a run whose status stays ``running``.
    """

    def begin(self, meta: RunMeta, topology: Topology, queries: Sequence[QueryRecord]) -> None: ...

    def write_frames(self, results: Sequence[FrameResult]) -> None: ...

    def write_drops(self, drops: Sequence[DropCount]) -> None: ...

    def write_table(self, table: str, columns: dict[str, NDArray[Any] | list[Any]]) -> None:
        """Append rows to ``calibration``, ``clock_fit`` or ``record`` (equal-length columns)."""
        ...

    def amend(self, topology: Topology, queries: Sequence[QueryRecord]) -> None:
        """The run grew while it went on (stages, channels and probes a drop-in program made
        after monitoring began): ``topology`` and ``queries`` replace what ``begin`` wrote."""
        ...

    def finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None: ...

    def close(self) -> None: ...


class _Lifecycle(ABC):
    """Checks the call order; subclasses do the storing in the ``_do_*`` hooks."""

    _state = "new"

    def begin(self, meta: RunMeta, topology: Topology, queries: Sequence[QueryRecord]) -> None:
        self._expect("new", "begin")
        self._do_begin(meta, topology, tuple(queries))
        self._state = "open"

    def write_frames(self, results: Sequence[FrameResult]) -> None:
        self._expect("open", "write_frames")
        if results:
            self._do_write(_rows.flatten(results), [])

    def write_drops(self, drops: Sequence[DropCount]) -> None:
        self._expect("open", "write_drops")
        if drops:
            self._do_write(None, drops)

    def amend(self, topology: Topology, queries: Sequence[QueryRecord]) -> None:
        self._expect("open", "amend")
        self._do_amend(topology, tuple(queries))

    @abstractmethod
    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...]) -> None:
        """Store it (the subclass's part of the call)."""

    def write_table(self, table: str, columns: dict[str, NDArray[Any] | list[Any]]) -> None:
        self._expect("open", "write_table")
        if table not in APPEND_TABLES:
            raise ValueError(f"write_table appends to {', '.join(APPEND_TABLES)}, not {table!r}")
        names = [c.name for c in APPEND_TABLES[table].columns]
        if sorted(columns) != sorted(names):
            raise ValueError(f"{table} needs columns {names}, got {sorted(columns)}")
        if len(columns[names[0]]):
            self._do_table(table, [columns[n] for n in names])

    @abstractmethod
    def _do_table(self, table: str, columns: list[NDArray[Any] | list[Any]]) -> None:
        """Store it (the subclass's part of the call)."""

    def finish(self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int) -> None:
        """``status``: ``completed``, ``failed`` or ``interrupted``; ``duration_ns``: virtual ns."""
        self._expect("open", "finish")
        if status not in ENDED_STATUSES:
            raise ValueError(
                f"finish status must be one of {', '.join(ENDED_STATUSES)}, not {status!r}"
            )
        self._do_finish(status, error, ended_unix_ns, duration_ns)
        self._state = "finished"

    def close(self) -> None:
        self._state = "closed"

    def _expect(self, state: str, call: str) -> None:
        if self._state != state:
            raise RuntimeError(f"{call}() called on a run store that is {self._state}")

    @abstractmethod
    def _do_begin(
        self, meta: RunMeta, topology: Topology, queries: tuple[QueryRecord, ...]
    ) -> None:
        """Store it (the subclass's part of the call)."""

    @abstractmethod
    def _do_write(self, rows: _rows.Rows | None, drops: Sequence[DropCount]) -> None:
        """Store it (the subclass's part of the call)."""

    @abstractmethod
    def _do_finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None:
        """Store it (the subclass's part of the call)."""


class InMemoryStore(_Lifecycle):
    """Keeps a run as row lists shaped like the file's tables; read it with ``Run.from_memory``."""

    def __init__(self) -> None:
        self.meta: RunMeta | None = None
        self.topology = Topology("")
        self.queries: tuple[QueryRecord, ...] = ()
        self.status = "running"
        self.error: str | None = None
        self.ended_unix_ns: int | None = None
        self.duration_ns: int | None = None
        self.frames: list[_rows.FrameRow] = []
        self.stats: list[_rows.StatRow] = []
        self.hists: list[_rows.HistRow] = []
        self.drops: list[tuple[int, int, int, int]] = []
        self.tables: dict[str, list[tuple[Any, ...]]] = {t: [] for t in APPEND_TABLES}

    def _do_begin(
        self, meta: RunMeta, topology: Topology, queries: tuple[QueryRecord, ...]
    ) -> None:
        self.meta, self.topology, self.queries = meta, topology, queries

    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...]) -> None:
        self.topology, self.queries = topology, queries

    def _do_write(self, rows: _rows.Rows | None, drops: Sequence[DropCount]) -> None:
        if rows is not None:
            self.frames.extend(zip(*rows.frame, strict=True))
            self.stats.extend(zip(*rows.stat, strict=True))
            self.hists.extend(zip(*rows.hist, strict=True))
        self.drops.extend((d.probe_id, d.frame, d.dropped, d.recorded) for d in drops)

    def _do_table(self, table: str, columns: list[NDArray[Any] | list[Any]]) -> None:
        cols = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in columns]
        self.tables[table].extend(zip(*cols, strict=True))

    def _do_finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None:
        self.status, self.error = status, error
        self.ended_unix_ns, self.duration_ns = ended_unix_ns, duration_ns


class DuckDBStore(_Lifecycle):
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
    ) -> None:
        self.path = Path(path)
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
        self._con: duckdb.DuckDBPyConnection | None = None
        #: The connection failed (a full disk): ``finish`` reopens the file to say so.
        self._broken = False
        self._refuse_existing()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

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

    def _refuse_existing(self) -> None:
        if self.path.is_dir():
            raise RunFileError(f"{self.path} is a directory; give a file path for the run")
        if self.path.exists() and not self.overwrite:
            raise RunFileError(
                f"{self.path} already exists; choose another path, or pass overwrite=True to replace it"
            )

    def _do_begin(
        self, meta: RunMeta, topology: Topology, queries: tuple[QueryRecord, ...]
    ) -> None:
        if self._lock is None:
            self._lock = WriterLock(self.path).acquire()
        self._refuse_existing()
        for p in (self.path, _wal(self.path)):
            p.unlink(missing_ok=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            _reserve(self.path)
            self._con = _duckdb().connect(str(self.path))
            with self._transaction() as con:
                _sqlio().create(con, meta, topology, queries)
        except BaseException as exc:
            self.close()
            self.path.unlink(missing_ok=True)
            _wal(self.path).unlink(missing_ok=True)
            if _no_space(exc):
                raise RunFileError(_full(self.path, exc)) from None
            raise

    def _do_write(self, rows: _rows.Rows | None, drops: Sequence[DropCount]) -> None:
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

    def _do_table(self, table: str, columns: list[NDArray[Any] | list[Any]]) -> None:
        with self._transaction(checkpoint=False) as con:
            _sqlio().insert(con, table, columns)

    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...]) -> None:
        with self._transaction(checkpoint=False) as con:
            _sqlio().replace_topology(con, topology, queries)

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
