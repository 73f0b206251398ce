"""One drain of the run's rings into the engine, and the monitor's own figures per frame.

In: the rings (a ``RingSet``), the host's time of the drain, and the engine. Out: the drained
records and refusals in the engine, each domain's; the rings' watermark (what no record still to
come is older than); and per frame of virtual time, the monitor's lag, records, CPU and drains
(the ``monitor`` table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamscope.core.records import empty_records
from streamscope.monitor.engine import Engine
from streamscope.monitor.ringset import RingSet

#: Records drained in one cycle at most, over every ring: what the monitor holds at a time
#: stays bounded when it falls behind (the rings refuse, and count, what it cannot take).
DRAIN_BUDGET = 1 << 18
#: How far the reduced timeline may trail real time when the monitor cannot drain every ring
#: in full; records drained later than this are counted as refused.
MAX_LAG_NS = 1_000_000_000
#: How often the monitor looks for writers whose process ended (a pool's worker that is gone
#: is in no state, not idle).
GONE_CHECK_NS = 250_000_000


class Drainer:
    """Drains ``rings`` into ``engine`` (mutable: it remembers its previous drain)."""

    def __init__(self, rings: RingSet, engine: Engine) -> None:
        self.rings = rings
        self.engine = engine
        self._prev_drain: int | None = None
        self._gone_checked = 0

    def drain(self, t_now: int, t0: int, *, final: bool = False) -> int:
        """Drain at host time ``t_now`` (the run started at ``t0``); ``final``: every writer is
        done, so the rings are drained up to a common frontier in time. Returns the records."""
        eng = self.engine
        self.rings.scan()
        # While the run goes on, each ring gets its share of the budget (what a ring gives
        # ahead of the others waits at most MAX_LAG_NS, see below); at the end, when nothing
        # bounds the wait, the rings are drained up to a common frontier in time instead.
        drain = self.rings.drain(DRAIN_BUDGET, self._place if final else None)
        t_report = t_now - t0
        drops_of: dict[str, list[tuple[int, int, int]]] = {}
        for pid, count in drain.drops:
            drops_of.setdefault(eng.probe_domain(pid), []).append((pid, t_report, count))
        batches = drain.by_domain()
        for dom in set(batches) | set(drops_of):
            records = batches.get(dom)
            eng.ingest(
                dom, records if records is not None else empty_records(), drops_of.get(dom, ())
            )
        for pid, seq in drain.refused.items():
            eng.note_refused(pid, seq, t_report)
        closed = self.rings.take_closed()
        if closed:
            eng.rings_closed(closed, t_report)
        if t_now - self._gone_checked >= GONE_CHECK_NS or final:
            self._gone_checked = t_now
            for pid in self.rings.gone():
                eng.writer_gone(pid)
        eng.ring_watermark_ns = self._watermark(drain.left, t_now, t0, final)
        self._prev_drain = t_now
        return drain.n_records

    def _watermark(self, left: dict[str, int], t_now: int, t0: int, final: bool) -> int:
        """What no ring record still to come is older than (virtual ns)."""
        eng = self.engine
        # A writer reads its clock and commits its record in a few ns, so what this drain
        # did not see is younger than the previous drain: that is the rings' watermark.
        # Before the first drain, only the run's start is known to have passed. A ring left
        # partly drained holds it back to its oldest record still waiting.
        prev = self._prev_drain if self._prev_drain is not None else t0
        mark = max((t_now if final else prev) - t0, 0)
        for dom, ticks in left.items():
            if eng.domains.ready(dom):
                mark = min(mark, max(eng.domains.scalar_to_ns(dom, ticks), 0))
        # Never further behind than MAX_LAG_NS while the run goes on: what is older still
        # when it is drained is counted as refused (late), so what the monitor holds stays
        # bounded. At the end nothing is written any more: the rest is drained in turn.
        floor = 0 if final else t_now - t0 - MAX_LAG_NS
        return max(mark, floor)

    def _place(self, domain: str, ticks: int) -> int | None:
        """Virtual time of a record of ``domain`` (None: the domain is not calibrated yet)."""
        domains = self.engine.domains
        return domains.scalar_to_ns(domain, ticks) if domains.ready(domain) else None


@dataclass(slots=True)
class _FrameStats:
    """The monitor's own figures over one frame of virtual time (mutable: they add up)."""

    lag_ns: int = 0
    records: int = 0
    cpu_ns: int = 0
    drains: int = 0


class MonitorStats:
    """The monitor's own lag, records, CPU and drains per frame (the ``monitor`` table)."""

    def __init__(self, frame_ns: int, cpu_ns: int) -> None:
        self.frame_ns = frame_ns
        self._stats: dict[int, _FrameStats] = {}
        self._cpu_mark = cpu_ns
        #: CPU the monitor spent since it started.
        self.cpu_ns = 0

    def add(self, t_ns: int, lag_ns: int, records: int, cpu_ns: int) -> None:
        """One drain at virtual time ``t_ns``: how far the drained timeline trailed real time
        (one drain period when the monitor keeps up, the whole stall when it does not)."""
        st = self._stats.setdefault(max(t_ns, 0) // self.frame_ns, _FrameStats())
        st.lag_ns = max(st.lag_ns, lag_ns)
        st.records += records
        st.cpu_ns += cpu_ns - self._cpu_mark
        st.drains += 1
        self.cpu_ns += cpu_ns - self._cpu_mark
        self._cpu_mark = cpu_ns

    def rows_before(self, before_frame: int | None) -> dict[str, Any] | None:
        """The ``monitor`` table's rows of the frames before ``before_frame`` (None: all)."""
        done = sorted(f for f in self._stats if before_frame is None or f < before_frame)
        if not done:
            return None
        rows = [self._stats.pop(f) for f in done]
        return {
            "frame": done, "lag_ns": [r.lag_ns for r in rows],
            "records": [r.records for r in rows], "cpu_ns": [r.cpu_ns for r in rows],
            "drains": [r.drains for r in rows],
        }  # fmt: skip
