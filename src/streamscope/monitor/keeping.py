"""The raw records a run keeps besides its frames: for re-timing, for traces, for its last stretch.

In: each placed batch of records (raw ticks, and their virtual ns). Out: the ``record`` table's
rows for the probes whose records are kept whole (clock domains' and crossing channels' ends, for
``retime``; every probe with ``trace``), traced functions' calls folded into profiles, and a
bounded flight recorder of the latest of the rest (written at the end).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.profile import ProfileBuilder
from streamscope.core.records import Records
from streamscope.core.tablerows import TableRows, TableSink
from streamscope.core.topology import HOST, Topology
from streamscope.monitor import endtables
from streamscope.monitor.flight import FlightRecorder
from streamscope.reduction.ledger import Ledger


class Keeper:
    """What is kept of a run's raw records (mutable: profiles and the flight recorder fill)."""

    def __init__(
        self, topology: Topology, on_table: TableSink | None, trace: bool, flight_records: int
    ) -> None:
        self.on_table = on_table
        self.trace = trace
        #: Channels whose two ends are in different clock domains.
        self.crossing = topology.crossing_channels()
        #: Probes whose raw records are kept for ``retime``: those of clock domains, and both
        #: ends of every crossing channel; with ``trace``, every probe's (for trace export).
        self.keep_raw = {
            p.id for p in topology.probes
            if trace or p.domain != HOST or p.target in self.crossing or p.kind == "trace"
        }  # fmt: skip
        #: The latest of the other records (host stages' states, host channels' ends), so an
        #: export of an ordinary run shows its last stretch; with ``trace`` all are kept anyway.
        self.flight = FlightRecorder(0 if trace else flight_records)
        #: Function tracing: the traced stage of each trace probe, and their profiles.
        self.traces = {p.id: p.target for p in topology.probes if p.kind == "trace"}
        self._trace_ids = np.fromiter(self.traces, dtype=np.int64, count=len(self.traces))
        self._not_flown = np.fromiter(self.keep_raw | set(self.traces), dtype=np.int64)
        self.profiles = ProfileBuilder()

    def keep(self, rec: Records, t: NDArray[np.int64], ledger: Ledger) -> NDArray[np.bool_]:
        """Keep what is kept of ``rec`` (placed at ``t``); returns which records are left to
        reduce (traced calls go to profiles instead)."""
        if self.on_table is not None and (self.trace or self.keep_raw) and len(rec):
            # with ``trace``, every probe's: those that appear as a program runs too
            mask = (
                np.ones(len(rec), dtype=bool)
                if self.trace
                else np.isin(rec["probe"], np.fromiter(self.keep_raw, dtype=np.int64))
            )
            if mask.any():
                self.on_table(TableRows("record", endtables.record_columns(rec[mask])))
        if self.flight.capacity and len(rec):
            flown = ~np.isin(rec["probe"], self._not_flown) if len(self._not_flown) else None
            self.flight.add(rec[flown] if flown is not None else rec)
        rest = np.ones(len(rec), dtype=bool)
        if self.traces:
            traced = np.isin(rec["probe"], self._trace_ids)
            if traced.any():
                self._calls(rec[traced], t[traced], ledger)
                rest &= ~traced
        return rest

    def _calls(self, rec: Records, t: NDArray[np.int64], ledger: Ledger) -> None:
        """Function enter/exit records into each traced stage's profile (one tap per thread,
        its records in time order)."""
        probes = rec["probe"].astype(np.int64)
        for pid in np.unique(probes).tolist():
            sel = probes == pid
            self.profiles.add(
                self.traces[pid],
                t[sel],
                rec["kind"][sel].astype(np.int64),
                rec["value"][sel].astype(np.int64),
            )
            ledger.kept(pid, t[sel])

    def tables(self, end_ns: int) -> Iterator[TableRows]:
        """At the end: the profiles, and the flight recorder's records."""
        if self.traces:
            yield from endtables.profile_table(self.profiles, end_ns)
        yield from endtables.flight_tables(self.flight)
