"""A path whose items cannot be followed: its mean latency from Little's law, frame by frame.

In: what the channels and stages on a path ``SRC ~> DST`` hand their reducers (each channel's
occupancy and removals, each inner stage's states), through tallies registered beside the
query reducers of those (metric, target) pairs. Out: one mean latency per frame (ns), fed to the
path's ``latency`` reducer, where every part of the path moved items in the frame.

Each part's mean time per item is Little's law over the frame, ``W = (time-integral of the
items in it) / (items that left it)``: a channel holds its occupancy; a stage holds an item
while busy or blocked putting it (its workers' time in those states, added). The mean from
``SRC`` to an inner stage or to ``DST`` is the flow-weighted mean over the channels into it of
(the mean at the channel's producer's exit + the channel's ``W``); a stage's exit adds its own
``W``. So parallel branches weigh by what each carried, and a generator's outputs each carry
their input's time, as the followed path's samples do. It is a mean only: no item's own time
is known, so neither its spread nor a percentile.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from streamscope.aggregate.points import FrameResult
from streamscope.aggregate.specs import AggregationSpec
from streamscope.core.records import State
from streamscope.core.topology import ChannelInfo, Topology, path_ends
from streamscope.reduction.reducers import ReducerIndex, TargetReducer
from streamscope.reduction.streams import I64, Events, Segments, frame_pieces

#: A stage holds an item in these states (taking its next one, it holds none).
HOLDING = (int(State.BUSY), int(State.BLOCKED_OUT))


class Tally:
    """Per frame: the time-integral of a level (item-ns, ``add_segments``) or the items
    counted (``add_times``).
    ``holding``: a stage's states, read as 1 while it holds an item."""

    def __init__(self, frame_ns: int, holding: bool = False) -> None:
        self.frame_ns = frame_ns
        self.holding = holding
        self.area: dict[int, float] = {}
        self.items: dict[int, float] = {}

    def _level(self, level: I64) -> np.ndarray:
        if self.holding:
            return np.isin(level, HOLDING).astype(np.float64)
        return level.astype(np.float64)

    def add_segments(self, seg: Segments) -> None:
        pieces = frame_pieces(seg, self.frame_ns)
        if pieces is None:
            return
        frames, levels, dur, _ = pieces
        for f, a in zip(frames.tolist(), (self._level(levels) * dur).tolist(), strict=True):
            self.area[f] = self.area.get(f, 0.0) + a

    def add_level(self, level: int, start_ns: int, end_ns: int) -> None:
        one = np.array([level], dtype=np.int64)
        self.add_segments(
            Segments(np.array([start_ns], dtype=np.int64), np.array([end_ns], dtype=np.int64), one)
        )

    def add_events(self, ev: Events) -> None:
        """Values (a channel's latencies): not what Little's law counts."""

    def add_times(self, ev: Events) -> None:
        if not len(ev.t):
            return
        frames = ev.t // self.frame_ns
        for f, n in zip(frames.tolist(), ev.value.tolist(), strict=True):
            self.items[f] = self.items.get(f, 0.0) + n

    def add_quality(
        self, violations: I64, uncertainty_ns: float, start_ns: int, end_ns: int
    ) -> None:
        """Clock quality: a path whose items are not followed crosses no clock domain."""

    def forget(self, f: int) -> None:
        self.area.pop(f, None)
        self.items.pop(f, None)


class LittlePath(TargetReducer):
    """The ``latency`` reducer of one path ``SRC ~> DST`` whose items are not followed.

    ``topology``: the run's topology now (a program's stages and queues appear as it runs:
    ``attach`` again after it grows)."""

    def __init__(
        self,
        query_id: int,
        target: str,
        specs: tuple[AggregationSpec, ...],
        frame_ns: int,
        topology: Callable[[], Topology],
    ) -> None:
        super().__init__(query_id, "latency", target, specs, frame_ns)
        self.src, self.dst = path_ends(target)
        self._topology = topology
        self._channels: dict[str, Tally] = {}  # occupancy, by channel
        self._taken: dict[str, Tally] = {}  # removals, by channel
        self._stages: dict[str, Tally] = {}  # items held, by inner stage
        self._route: tuple[ChannelInfo, ...] = ()
        self._into: dict[str, list[ChannelInfo]] = {}  # every channel into each inner stage

    @property
    def route(self) -> tuple[ChannelInfo, ...]:
        """The channels on the path, as far as the topology has them."""
        return self._route

    def attach(self, index: ReducerIndex) -> None:
        """Tally every part of the path the topology has now (new ones from now on)."""
        topo = self._topology()
        self._route = topo.route(self.src, self.dst)
        inner = {c.dst for c in self._route} - {self.dst}
        self._into = {s: [c for c in topo.channels if c.dst == s] for s in inner}
        for c in {*self._route, *(c for cs in self._into.values() for c in cs)}:
            if c.name not in self._channels:
                self._channels[c.name] = Tally(self.frame_ns)
                self._taken[c.name] = Tally(self.frame_ns)
                index.tap("occupancy", c.name, self._channels[c.name])
                index.tap("throughput", c.name, self._taken[c.name])
        for s in inner:
            if s not in self._stages:
                self._stages[s] = Tally(self.frame_ns, holding=True)
                index.tap("state", s, self._stages[s])

    def mean_ns(self, f: int) -> float | None:
        """Frame ``f``'s mean time from ``SRC`` to ``DST`` (None: some part of the path moved
        nothing in it, or the path has no way yet)."""
        exits: dict[str, float | None] = {self.src: 0.0}

        def arrival(stage: str, seen: frozenset[str]) -> float | None:
            """The flow-weighted mean time from ``SRC`` to ``stage``'s input."""
            total = weight = 0.0
            for c in self._route:
                if c.dst != stage:
                    continue
                before = exit_of(c.src, seen | {stage})
                n = self._taken[c.name].items.get(f, 0.0)
                if before is None or n <= 0:
                    return None
                total += n * before + self._channels[c.name].area.get(f, 0.0)
                weight += n
            return total / weight if weight > 0 else None

        def exit_of(stage: str, seen: frozenset[str]) -> float | None:
            if stage in exits:
                return exits[stage]
            if stage in seen:
                return None  # a cycle: no mean along it
            at = arrival(stage, seen)
            held = self._stages.get(stage)
            taken = sum(self._taken[c.name].items.get(f, 0.0) for c in self._into.get(stage, ()))
            out = None
            if at is not None and held is not None and taken > 0:
                out = at + held.area.get(f, 0.0) / taken
            exits[stage] = out
            return out

        return arrival(self.dst, frozenset()) if self._route else None

    def close_until(self, t_ns: int, end_ns: int | None = None) -> list[FrameResult]:
        last = (
            (t_ns // self.frame_ns) - 1 if end_ns is None else max(end_ns - 1, 0) // self.frame_ns
        )
        for f in range(self.next_frame, last + 1):
            mean = self.mean_ns(f)
            if mean is not None:
                self._feed(
                    np.array([f], dtype=np.int64), np.array([mean]), None,
                    np.array([f * self.frame_ns], dtype=np.int64),
                )  # fmt: skip
            for tally in (*self._channels.values(), *self._taken.values(), *self._stages.values()):
                tally.forget(f)
        return super().close_until(t_ns, end_ns)
