"""A cluster host's own frames: the monitor's reduction, run on the host for the (query, target)
pairs whose taps all lie there (``Plan.host_reduced``).

In: the host's records in its clock's ticks (as its agent drains them, refusals included), the
pairs, and where the run's frame grid lies on the host's clock (origin and ticks per ns, sent by
the runner after each calibration burst; the latest wins). Out: each pair's ``FrameResult``s once
the agent's watermark has passed their end, encoded for SUMMARY messages with where each frame's
edges lay in the host's ticks (``aggregate.shipped``). The records stay on the host: what crosses
is a frame per pair and frame length, whatever the rate. The streams and reducers are the
monitor's own (``monitor.routing``, ``monitor.reducers``), so a frame reads the same wherever it
was closed.
"""

from __future__ import annotations

import numpy as np

from streamscope.aggregate.points import FrameResult
from streamscope.aggregate.shipped import ShippedFrame, encode_frames
from streamscope.core.records import Kind, Records
from streamscope.core.topology import ProbeInfo
from streamscope.monitor.ledger import Ledger
from streamscope.monitor.reducers import ReducerIndex, TargetReducer
from streamscope.monitor.routing import Routes
from streamscope.monitor.streams import EVENT_METRICS
from streamscope.pipeline.local import HostPair
from streamscope.query.metrics import METRICS

#: The probe kind each value metric reads (``EVENT_METRICS`` the other way round).
_VALUE_PROBE = {metric: kind for kind, metric in EVENT_METRICS.items()}


def pair_taps(metric: str, target: str) -> set[tuple[str, str]]:
    """The (probe kind, target) of every tap a (metric, target) pair reads."""
    info = METRICS[metric]
    if info.on_edge:
        return {(tap, target) for tap in info.taps}
    kind = _VALUE_PROBE.get(metric)
    return {(kind, target)} if kind else {(tap, target) for tap in info.taps}


class HostFrames:
    """The frames of one host's pairs (``pipeline.onboard.FrameReducer``)."""

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
        self._grid: tuple[float, float] | None = None  # origin (ticks), ticks per ns
        self._waiting: list[Records] = []  # records taken before the first grid
        self._reduced_ns = 0  # reduced up to here (virtual ns by the grid)

    def set_grid(self, origin_ticks: float, ticks_per_ns: float) -> None:
        first = self._grid is None
        self._grid = (float(origin_ticks), float(ticks_per_ns))
        if first:
            waiting, self._waiting = self._waiting, []
            for records in waiting:
                self.add(records)

    def _ns(self, ticks: np.ndarray) -> np.ndarray:
        """Virtual ns by the latest grid, never before what is reduced already (a refined grid
        may move the map back by microseconds: nothing it moves is lost)."""
        assert self._grid is not None
        origin, per_ns = self._grid
        t = np.floor((ticks.astype(np.float64) - origin) / per_ns).astype(np.int64)
        return np.maximum(t, self._reduced_ns)

    def _ticks(self, t_ns: int) -> float:
        assert self._grid is not None
        origin, per_ns = self._grid
        return origin + t_ns * per_ns

    def add(self, records: Records) -> None:
        """This flush's records (any probe's: only its own are taken)."""
        mine = records[np.isin(records["probe"], np.fromiter(self.probes, np.int64))]
        if not len(mine):
            return
        if self._grid is None:
            self._waiting.append(mine.copy())
            return
        kinds = mine["kind"]
        dropped, refused = kinds == Kind.DROPPED, kinds == Kind.REFUSED
        events = mine[~(dropped | refused)]
        if len(events):
            self.routes.route(events, self._ns(events["ticks"]), 0.0, self.ledger)
        for row in mine[dropped | refused]:
            tap = self.routes.taps.get(int(row["probe"]))
            if tap is None:
                continue
            t_report = int(self._ns(np.array([row["ticks"]]))[0])
            if row["kind"] == Kind.DROPPED:
                tap.refuse(t_report)
            else:
                tap.know(int(row["value"]), t_report)

    def close_until(self, watermark_ticks: int) -> list[bytes]:
        """Every frame that ends before the agent's watermark, encoded."""
        if self._grid is None:
            return []
        wm = int(self._ns(np.array([watermark_ticks]))[0])
        self.routes.reduce(wm, self.reducers)
        self._reduced_ns = wm
        return self._ship(self.reducers.close_until(wm))

    def finish(self, end_ticks: int) -> list[bytes]:
        """The host's stages have ended at ``end_ticks``: every frame up to it, the last one
        partial; items refused after each end's last kept record are counted all the same."""
        if self._grid is None:
            return []
        end = int(self._ns(np.array([end_ticks]))[0])
        for name, stream in self.routes.channels.items():
            for side, metric in (("tail", "count"), ("head", "throughput")):
                extra = stream.unrecorded(side, end)
                if len(extra.t):
                    for r in self.reducers(metric, name):
                        r.add_times(extra)
        self.routes.reduce(end, self.reducers)
        self._reduced_ns = end
        return self._ship(self.reducers.close_until(end, end))

    def _ship(self, results: list[FrameResult]) -> list[bytes]:
        if not results:
            return []
        return [
            encode_frames(
                [ShippedFrame(r, self._ticks(r.t_start_ns), self._ticks(r.t_end_ns))
                 for r in results]
            )
        ]  # fmt: skip
