"""What a run store is: the values a run is written as, the order of the calls, and the store
that keeps a run in memory.

In: a run's metadata, topology, queries, frame results, drops and appended tables. Out:
``RunStore`` (the protocol the monitor writes through), ``BaseStore`` (its call order checked)
and ``InMemoryStore`` (row lists shaped like the file's tables; read with ``Run.from_memory``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.tablerows import Column, TableRows
from streamscope.core.topology import Topology
from streamscope.store import _rows
from streamscope.store.retention import Retention, roll_rows
from streamscope.store.schema import STATUSES, TABLES

#: Tables a run appends to besides frames: calibrations, fits and raw records of clock domains.
_APPENDED = (
    "calibration", "clock_fit", "clock_truth", "flight", "worker", "stall", "record", "vq_frame",
    "vq_level", "virtual_queue", "overhead", "profile", "trace_exclusion", "monitor", "runner",
    "service", "machine", "link", "host", "core", "note", "ended", "leftover", "stacks",
    "stack_sampler", "stack_id",
)  # fmt: skip
APPEND_TABLES = {t.name: t for t in TABLES if t.name in _APPENDED}
#: Of those, the ones ``--keep`` rolls up with the frames (``store.retention``).
_ROLLED = ("monitor", "stacks", "vq_level")

ENDED_STATUSES = tuple(s for s in STATUSES if s != "running")


def check_rows(rows: TableRows) -> list[str]:
    """Refuse rows for a table a run does not append to, or with other columns than it
    declares; returns its column names in their declared order."""
    if rows.table not in APPEND_TABLES:
        raise ValueError(f"write_table appends to {', '.join(APPEND_TABLES)}, not {rows.table!r}")
    names = [c.name for c in APPEND_TABLES[rows.table].columns]
    if sorted(rows.columns) != sorted(names):
        raise ValueError(f"{rows.table} needs columns {names}, got {sorted(rows.columns)}")
    return names


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
    #: The CPUs the run's processes could use (its affinity when it started): the cores the
    #: what-if model's processes share. 0: not known.
    cpus: int = 0


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

    def write_table(self, rows: TableRows) -> None:
        """Append ``rows`` to one of ``APPEND_TABLES`` (checked by ``check_rows``)."""
        ...

    def write_batch(
        self,
        results: Sequence[FrameResult],
        drops: Sequence[DropCount],
        tables: Sequence[TableRows],
    ) -> None:
        """``write_frames``, ``write_drops`` and ``write_table`` of each of ``tables`` at once."""
        ...

    def amend(self, topology: Topology, queries: Sequence[QueryRecord] | None) -> None:
        """The run grew while it went on (stages, channels and probes a drop-in program made
        after monitoring began): ``topology`` extends the one given last (what it adds is
        appended to the file's tables, nothing written is rewritten); ``queries`` replace the
        query rows (their targets grew; None: they stay as they are)."""
        ...

    def finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None: ...

    def close(self) -> None: ...


class BaseStore(ABC):
    """A ``RunStore`` that checks the call order; subclasses do the storing in the ``_do_*``
    hooks (each documented where it is declared)."""

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

    def amend(self, topology: Topology, queries: Sequence[QueryRecord] | None) -> None:
        self._expect("open", "amend")
        self._do_amend(topology, tuple(queries) if queries is not None else None)

    @abstractmethod
    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...] | None) -> None:
        """Store it (the subclass's part of the call)."""

    def write_table(self, rows: TableRows) -> None:
        self._expect("open", "write_table")
        names = check_rows(rows)
        if len(rows):
            self._do_table(rows.table, [rows.columns[n] for n in names])

    def write_batch(
        self,
        results: Sequence[FrameResult],
        drops: Sequence[DropCount],
        tables: Sequence[TableRows],
    ) -> None:
        """``write_frames``, ``write_drops`` and ``write_table`` of each of ``tables``, as one
        write (one transaction, where the store has them): a monitor of short frames writes
        what piled up meanwhile at once, not a transaction per frame."""
        self._expect("open", "write_batch")
        parts: dict[str, list[list[Column]]] = {}  # a table's rows, one insert for them all
        for rows in tables:
            names = check_rows(rows)
            if len(rows):
                parts.setdefault(rows.table, []).append([rows.columns[n] for n in names])
        self._do_batch(
            _rows.flatten(results) if results else None,
            drops,
            [(table, _joined(p)) for table, p in parts.items()],
        )

    def _do_batch(
        self,
        rows: _rows.Rows | None,
        drops: Sequence[DropCount],
        tables: Sequence[tuple[str, list[Column]]],
    ) -> None:
        """Store it (a store of transactions makes it one)."""
        if rows is not None or drops:
            self._do_write(rows, drops)
        for table, columns in tables:
            self._do_table(table, columns)

    @abstractmethod
    def _do_table(self, table: str, columns: list[Column]) -> None:
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


def _joined(parts: list[list[Column]]) -> list[Column]:
    """The columns of several rows of one table, one after the other."""
    if len(parts) == 1:
        return parts[0]
    out: list[Column] = []
    for cols in zip(*parts, strict=True):
        if all(hasattr(c, "dtype") for c in cols):  # numpy's: loaded by whoever made them
            import numpy as np

            out.append(np.concatenate(cols))
        else:
            out.append([v for c in cols for v in c])
    return out


class InMemoryStore(BaseStore):
    """Keeps a run as row lists shaped like the file's tables; read it with ``Run.from_memory``."""

    def __init__(self, keep_ns: int | None = None) -> None:
        #: ``--keep`` (ns): frames older than this are rolled up as they come, as a run file's
        #: are (``store.retention``); None: every frame kept.
        self.keep_ns = keep_ns
        self._retention: Retention | None = None
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
        if self.keep_ns is not None:
            lengths = {q.id: q.frame_ns for q in queries}
            self._retention = Retention(self.keep_ns, lengths, meta.frame_ns)

    def _do_amend(self, topology: Topology, queries: tuple[QueryRecord, ...] | None) -> None:
        self.topology = topology
        if queries is not None:
            self.queries = queries
            if self._retention is not None:
                self._retention.frame_ns.update({q.id: q.frame_ns for q in queries})

    def _do_write(self, rows: _rows.Rows | None, drops: Sequence[DropCount]) -> None:
        if rows is not None:
            self.frames.extend(zip(*rows.frame, strict=True))
            self.stats.extend(zip(*rows.stat, strict=True))
            self.hists.extend(zip(*rows.hist, strict=True))
        self.drops.extend((d.probe_id, d.frame, d.dropped, d.recorded) for d in drops)
        kept = self._retention
        if kept is not None and rows is not None and rows.frame[4]:
            now = max(rows.frame[4])
            if kept.due(now):
                self._roll(kept, now)

    def _roll(self, kept: Retention, now_ns: int) -> None:
        assert self.meta is not None
        got = roll_rows(kept, {
            "frame": self.frames, "stat": self.stats, "histogram": self.hists,
            "drops": self.drops,
            **{t: self.tables[t] for t in _ROLLED},
        }, now_ns)  # fmt: skip
        self.frames, self.stats, self.hists = got["frame"], got["stat"], got["histogram"]
        self.drops = got["drops"]
        self.tables.update((t, got[t]) for t in _ROLLED)

    def _do_table(self, table: str, columns: list[Column]) -> None:
        cols = [
            c.tolist() if hasattr(c, "tolist") else list(c) for c in columns
        ]  # numpy's or a list
        self.tables[table].extend(zip(*cols, strict=True))

    def _do_finish(
        self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int
    ) -> None:
        if self._retention is not None and self.meta is not None:
            self._roll(self._retention, duration_ns)  # as the run file's last roll-up
        self.status, self.error = status, error
        self.ended_unix_ns, self.duration_ns = ended_unix_ns, duration_ns


__all__ = [
    "APPEND_TABLES",
    "ENDED_STATUSES",
    "BaseStore",
    "InMemoryStore",
    "QueryRecord",
    "RunMeta",
    "RunStore",
]
