"""A cluster host's own frames: the monitor's reduction, run on the host for the (query, target)
pairs whose taps all lie there (``Plan.host_reduced``).

In: the host's records in its clock's ticks (as its agent drains them, refusals included), the
pairs, and where the run's frame grid lies on the host's clock (origin and ticks per ns, sent by
the runner after each calibration burst; the latest wins). Out: each pair's ``FrameResult``s once
the agent's watermark has passed their end, encoded for SUMMARY messages with where each frame's
edges lay in the host's ticks (``aggregate.shipped``). The records stay on the host: what crosses
is a frame per pair and frame length, whatever the rate. The streams and reducers are the ones
the monitor closes its frames with (``reduction.routing``, ``reduction.reducers``), so a frame
reads the same wherever it was closed. The latency of a link into the host is paired here too: each batch brings its
items' insertion ticks in the producer's clock (``HostLink.stamp``), placed by the grid the
runner sends of that clock; each frame says what it took from it, for the monitor's bounds.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.typing import NDArray

from streamscope.agents.assignments import HostPair
from streamscope.agents.gridmap import GridMap
from streamscope.aggregate.frames import runs
from streamscope.aggregate.points import FrameResult
from streamscope.aggregate.shipped import ShippedFrame, Stamped, encode_frames
from streamscope.core.records import Kind, Records
from streamscope.core.topology import ProbeInfo
from streamscope.query.metrics import METRICS
from streamscope.reduction.ledger import Ledger
from streamscope.reduction.reducers import ReducerIndex, TargetReducer
from streamscope.reduction.routing import Routes
from streamscope.reduction.streams import EVENT_METRICS, Events

#: The probe kind each value metric reads (``EVENT_METRICS`` the other way round).
_VALUE_PROBE = {metric: kind for kind, metric in EVENT_METRICS.items()}


def pair_taps(metric: str, target: str) -> set[tuple[str, str]]:
    """The (probe kind, target) of every tap a (metric, target) pair reads."""
    info = METRICS[metric]
    if info.on_edge:
        return {(tap, target) for tap in info.taps}
    kind = _VALUE_PROBE.get(metric)
    return {(kind, target)} if kind else {(tap, target) for tap in info.taps}


I64 = NDArray[np.int64]
_NONE = np.zeros(0, dtype=np.int64)


class LinkLatency:
    """A link's latency at its consumer's host: each item's insertion ticks (the producer's
    clock, brought by its batch) paired with its removal here, FIFO by number."""

    def __init__(self, channel: str, domain: str, head: int) -> None:
        self.channel = channel
        self.domain = domain  #: the producer's clock domain
        self.head = head  #: the probe of the removals (this host's)
        self._lock = threading.Lock()
        self._incoming: list[tuple[int, list[int]]] = []
        self._seq, self._ticks = _NONE, _NONE  # insertions not paired yet
        self._held_t, self._held_s = _NONE, _NONE  # removals waiting for the producer's grid
        #: Removals whose insertion never came (none, unless a batch was lost).
        self.unmatched = 0
        #: Per latency query: per frame, [earliest and latest insertion ticks, and their
        #: virtual ns; violations; the most negative latency's size].
        self.frames: dict[int, dict[int, list[float]]] = {}

    def receive(self, seq0: int, stamps: list[int]) -> None:
        """A batch's items, numbered from ``seq0``: their insertion ticks (the link's receiving
        thread, before it puts them in the head buffer)."""
        with self._lock:
            self._incoming.append((seq0, stamps))

    def _absorb(self) -> None:
        with self._lock:
            got, self._incoming = self._incoming, []
        if got:
            seqs = [np.arange(s0, s0 + len(st), dtype=np.int64) for s0, st in got]
            ticks = [np.asarray(st, dtype=np.int64) for _, st in got]
            self._seq = np.concatenate([self._seq, *seqs])
            self._ticks = np.concatenate([self._ticks, *ticks])

    def pair(self, t_out: I64, seq: I64, grid: tuple[float, float] | None) -> tuple[I64, I64, I64]:
        """Removals at ``t_out`` (virtual ns) of items ``seq``: (removal times, latencies, the
        items' insertion ticks) of those paired now; all wait while the producer's clock has no
        grid yet."""
        self._absorb()
        t_out = np.concatenate((self._held_t, t_out))
        seq = np.concatenate((self._held_s, seq))
        if grid is None or not len(seq):
            self._held_t, self._held_s = t_out, seq
            return _NONE, _NONE, _NONE
        self._held_t, self._held_s = _NONE, _NONE
        idx = np.searchsorted(self._seq, seq)
        safe = np.minimum(idx, max(len(self._seq) - 1, 0))
        found = (idx < len(self._seq)) & (self._seq[safe] == seq) if len(self._seq) else idx < 0
        self.unmatched += int((~found).sum())
        t_in_ticks = self._ticks[safe[found]]
        origin, per_ns = grid
        t_in = np.floor((t_in_ticks - origin) / per_ns).astype(np.int64)
        keep = self._seq > seq.max()
        self._seq, self._ticks = self._seq[keep], self._ticks[keep]
        return t_out[found], t_out[found] - t_in, t_in_ticks

    def note(self, query_id: int, frame_ns: int, t_out: I64, lat: I64, ticks: I64,
             grid: tuple[float, float]) -> None:  # fmt: skip
        """What each frame of query ``query_id`` took from the producer's clock."""
        if not len(t_out):
            return
        per = self.frames.setdefault(query_id, {})
        frames, starts = runs(t_out // frame_ns)
        bounds = [*starts.tolist(), len(t_out)]
        origin, per_ns = grid
        for i, f in enumerate(frames.tolist()):
            tk, lt = ticks[bounds[i] : bounds[i + 1]], lat[bounds[i] : bounds[i + 1]]
            lo, hi = float(tk.min()), float(tk.max())
            row = per.get(f)
            new = [lo, hi, (lo - origin) / per_ns, (hi - origin) / per_ns,
                   float((lt < 0).sum()), float(max(0, -int(lt.min())))]  # fmt: skip
            if row is None:
                per[f] = new
            else:
                if new[0] < row[0]:
                    row[0], row[2] = new[0], new[2]
                if new[1] > row[1]:
                    row[1], row[3] = new[1], new[3]
                row[4] += new[4]
                row[5] = max(row[5], new[5])

    def stamped(self, query_id: int, frame: int) -> Stamped | None:
        row = self.frames.get(query_id, {}).pop(frame, None)
        if row is None:
            return None
        return Stamped(self.domain, row[0], row[1], row[2], row[3], int(row[4]), row[5])


class HostFrames:
    """The frames of one host's pairs (``agents.device.FrameReducer``)."""

    def __init__(
        self,
        pairs: tuple[HostPair, ...],
        probes: tuple[ProbeInfo, ...],
        tick_periods: dict[str, float],
    ) -> None:
        wanted = set().union(*(pair_taps(p.metric, p.target) for p in pairs))
        self.routes = Routes(tick_periods)
        ids = []
        for p in probes:
            if (p.kind, p.target) in wanted:
                self.routes.add(p)
                ids.append(p.id)
        #: The probes whose records it takes.
        self.probes = frozenset(ids)
        self.reducers = ReducerIndex(
            [TargetReducer(p.query_id, p.metric, p.target, p.specs, p.frame_ns) for p in pairs]
        )
        self.ledger = Ledger(min((p.frame_ns for p in pairs), default=1_000_000_000))
        #: The links into this host whose latency it pairs, by channel (their tails' probes
        #: are another clock's: the insertions come with the items).
        domain = {(p.kind, p.target): p.domain for p in probes}
        head = {p.target: p.id for p in probes if p.kind == "head"}
        self.links: dict[str, LinkLatency] = {}
        for pair in pairs:
            tail_domain = domain.get(("tail", pair.target))
            if pair.metric == "latency" and tail_domain != domain.get(("head", pair.target)):
                self.links[pair.target] = LinkLatency(
                    pair.target, str(tail_domain), head[pair.target]
                )
        self._latency_ids = {p.query_id for p in pairs if p.metric == "latency"}
        self._remote: dict[str, tuple[float, float]] = {}  # other domains' grids
        self._map = GridMap()  # this host's ticks to virtual ns
        self._waiting: list[Records] = []  # records taken before the first grid
        self._reduced_ns = 0  # reduced up to here (virtual ns by the grid)
        self._latest_ns = -1  # the latest record's time (a later grid may map the end sooner)
        #: (until, slack): records placed at or before ``until`` (virtual ns) may lie up to
        #: ``slack`` ns outside the edges shipped for the frames holding them (drained late).
        self._moved: list[tuple[int, float]] = []
        self._longest = max((p.frame_ns for p in pairs), default=1_000_000_000)

    def set_grid(self, origin_ticks: float, ticks_per_ns: float) -> None:
        """A grid of this host's clock: the map slews to it from the latest tick placed
        (``GridMap``), so that records placed already keep their places."""
        first = not self._map.ready
        placed = 0.0 if first else self._map.ticks(max(self._latest_ns, self._reduced_ns))
        self._map.set(origin_ticks, ticks_per_ns, placed, self._longest * ticks_per_ns)
        if first:
            waiting, self._waiting = self._waiting, []
            for records in waiting:
                self.add(records)

    def set_remote_grid(self, domain: str, origin_ticks: float, ticks_per_ns: float) -> None:
        self._remote[domain] = (float(origin_ticks), float(ticks_per_ns))

    def stamps_for(self, channel: str) -> LinkLatency | None:
        """Where the link ``channel``'s batches hand their stamps (None: not paired here)."""
        return self.links.get(channel)

    def _ns(self, ticks: np.ndarray, placed: bool = False) -> np.ndarray:
        """Virtual ns by the map, never before what is reduced already (a record drained
        late may have ticks from before it: nothing it moves is lost; ``placed``: records,
        moved so far ahead of the edges their frame ships with)."""
        t = self._map.ns(ticks)
        if placed and len(t) and (behind := self._reduced_ns - int(t.min())) > 0:
            self._moved.append((self._reduced_ns, float(behind)))
        return np.maximum(t, self._reduced_ns)

    def _ticks(self, t_ns: int) -> float:
        return self._map.ticks(t_ns)

    def add(self, records: Records) -> None:
        """This flush's records (any probe's: only its own are taken)."""
        mine = records[np.isin(records["probe"], np.fromiter(self.probes, np.int64))]
        if not len(mine):
            return
        if not self._map.ready:
            self._waiting.append(mine.copy())
            return
        kinds = mine["kind"]
        dropped, refused = kinds == Kind.DROPPED, kinds == Kind.REFUSED
        events = mine[~(dropped | refused)]
        if len(events):
            t = self._ns(events["ticks"], placed=True)
            self._latest_ns = max(self._latest_ns, int(t.max()))
            self.routes.route(events, t, 0.0, self.ledger)
            for link in self.links.values():
                sel = events["probe"] == link.head
                if sel.any():
                    self._pair(link, t[sel], events["value"][sel].astype(np.int64))
        for row in mine[dropped | refused]:
            tap = self.routes.taps.get(int(row["probe"]))
            if tap is None:
                continue
            t_report = int(self._ns(np.array([row["ticks"]]))[0])
            if row["kind"] == Kind.DROPPED:
                tap.refuse(t_report)
            else:
                tap.note_refused(int(row["value"]), t_report)

    def _pair(self, link: LinkLatency, t_out: I64, seq: I64) -> None:
        grid = self._remote.get(link.domain)
        t, lat, ticks = link.pair(t_out, seq, grid)
        if not len(t) or grid is None:
            return
        # An item removed before it was inserted by the two grids: the maps are off by that
        # much here; its latency is at least 0, and the frame's bounds cover the rest.
        events = Events(t, np.maximum(lat, 0))
        for r in self.reducers("latency", link.channel):
            assert isinstance(r, TargetReducer)
            link.note(r.query_id, r.frame_ns, t, lat, ticks, grid)
            r.add_events(events)

    def close_until(self, watermark_ticks: int) -> list[bytes]:
        """Every frame that ends before the agent's watermark, encoded."""
        if not self._map.ready:
            return []
        wm = int(self._ns(np.array([watermark_ticks]))[0])
        self.routes.reduce(wm, self.reducers)
        self._reduced_ns = wm
        return self._ship(self.reducers.close_until(wm))

    def finish(self, end_ticks: int) -> list[bytes]:
        """The host's stages have ended at ``end_ticks``: every frame up to it, the last one
        partial; items refused after each end's last kept record are counted all the same."""
        if not self._map.ready:
            return []
        # Never before a record taken: a grid that came since may place the end microseconds
        # sooner than the records mapped by the one before (the stages ended after them).
        end = max(int(self._ns(np.array([end_ticks]))[0]), self._latest_ns + 1)
        for link in self.links.values():  # removals still waiting for a grid: now or never
            self._pair(link, _NONE, _NONE)
        self.routes.count_unrecorded(end, self.reducers)
        self.routes.reduce(end, self.reducers)
        self._reduced_ns = end
        return self._ship(self.reducers.close_until(end, end))

    def _ship(self, results: list[FrameResult]) -> list[bytes]:
        if not results:
            return []
        shipped = []
        for r in results:
            link = self.links.get(r.target) if r.query_id in self._latency_ids else None
            # (a record placed at the end of the frame before, by the grid before, may lie inside
            # this one's start by its ticks)
            slack = max((s for until, s in self._moved if until + s >= r.t_start_ns), default=0.0)
            shipped.append(
                ShippedFrame(
                    r,
                    self._ticks(r.t_start_ns),
                    self._ticks(r.t_end_ns),
                    link.stamped(r.query_id, r.frame) if link else None,
                    slack,
                )
            )
        # Frames still open start after what is reduced less the longest frame.
        self._moved = [m for m in self._moved if m[0] + m[1] >= self._reduced_ns - self._longest]
        return [encode_frames(shipped)]  # fmt: skip
