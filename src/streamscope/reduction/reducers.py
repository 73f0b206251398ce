"""Per-query, per-target, per-frame reduction of stream outputs into accumulators.

In: segments (time-weighted levels) or events (times and values) in virtual ns since the run
start, from the streams' ``feed`` hooks. Out: ``FrameResult``s for every frame that the watermark
has passed, empty frames included. ``ReducerIndex`` finds a (metric, target)'s reducers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.accumulators import Accumulator
from streamscope.aggregate.frames import frame_index, runs
from streamscope.aggregate.points import FrameResult, Point, ScalarPoint
from streamscope.aggregate.specs import AggregationSpec
from streamscope.aggregate.timed import Extreme
from streamscope.query.metrics import METRICS
from streamscope.query.plan import Plan, TargetPlan
from streamscope.reduction.streams import Events, Segments, Sink, frame_pieces

I64 = NDArray[np.int64]
#: Throughput is sampled over this many equal windows per frame (its max is the peak window).
THROUGHPUT_WINDOWS = 10

#: Points of frames that held one level throughout (or nothing), by what decides them: a quiet
#: frame of one of many idle channels costs a look-up, not an accumulator per statistic.
#: Process-wide (the monitor process's): points are immutable, and the same for any reducer.
_QUIET: dict[tuple[object, ...], tuple[Point, ...]] = {}
_QUIET_MAX = 4096


def _quiet_points(
    key: tuple[object, ...], make: Callable[[], list[Accumulator]]
) -> tuple[Point, ...]:
    """The points for ``key``, made once by collecting the accumulators ``make`` fills."""
    pts = _QUIET.get(key)
    if pts is None:
        if len(_QUIET) >= _QUIET_MAX:
            _QUIET.clear()
        pts = _QUIET[key] = tuple(a.collect() for a in make())
    return pts


class TargetReducer:
    """One (query, target) pair: open frames and their accumulators."""

    def __init__(
        self,
        query_id: int,
        metric: str,
        target: str,
        specs: tuple[AggregationSpec, ...],
        frame_ns: int,
        crossing: bool = False,
    ) -> None:
        self.query_id = query_id
        self.metric = metric
        self.target = target
        self.specs = specs
        self.frame_ns = frame_ns
        #: The target crosses clock domains: its frames also say how uncertain their times are
        #: (``uncertainty_ns``) and how often the timeline broke causality (``violations``).
        self.crossing = crossing
        self.next_frame = 0  # every frame before this one has been emitted
        #: The span its target existed in (it appeared or ended while the run went on): its
        #: frames cover only their part of it.
        self.start_ns = 0
        self.end_ns: int | None = None
        self._open: dict[int, list[Accumulator]] = {}
        self._windows: dict[int, NDArray[np.float64]] = {}
        self._violations: dict[int, int] = {}
        self._uncertainty: dict[int, float] = {}
        #: Frames fed only a constant level so far (``add_level``): frame -> [level, ns, first
        #: piece's start]; fed to accumulators only if something else comes.
        self._level: dict[int, list[int]] = {}

    def add_quality(
        self, violations: I64, uncertainty_ns: float, start_ns: int, end_ns: int
    ) -> None:
        """Causality violations (their times) and the time uncertainty over [start_ns, end_ns)."""
        if not self.crossing:
            return
        if len(violations):
            frames, starts = runs(frame_index(violations, self.frame_ns))
            counts = np.diff(np.append(starts, len(violations)))
            for f, c in zip(frames.tolist(), counts.tolist(), strict=True):
                self._violations[f] = self._violations.get(f, 0) + c
        if end_ns > start_ns:
            for f in range(start_ns // self.frame_ns, (end_ns - 1) // self.frame_ns + 1):
                self._uncertainty[f] = max(self._uncertainty.get(f, 0.0), uncertainty_ns)

    def _accs(self, frame: int) -> list[Accumulator]:
        accs = self._open.get(frame)
        if accs is None:
            accs = self._open[frame] = [s.create() for s in self.specs]
        return accs

    def add_segments(self, seg: Segments) -> None:
        """Time-weighted levels; segments of unknown level (refused records) are left out."""
        pieces = frame_pieces(seg, self.frame_ns)
        if pieces is not None:
            frames, levels, dur, piece_start = pieces
            self._feed(frames, levels.astype(np.float64), dur.astype(np.float64), piece_start)

    def add_level(self, level: int, start_ns: int, end_ns: int) -> None:
        """One level held over ``[start_ns, end_ns)`` (a channel nothing happened in): the
        same as one segment to ``add_segments``, without an array or an accumulator per frame
        while its frames hold nothing else."""
        if end_ns <= start_ns or level < 0:
            return
        fn = self.frame_ns
        for f in range(start_ns // fn, (end_ns - 1) // fn + 1):
            if f < self.next_frame:
                continue
            lo = max(start_ns, f * fn)
            dur = min(end_ns, (f + 1) * fn) - lo
            held = self._level.get(f)
            if f in self._open or (held is not None and held[0] != level):
                self._spill(f)
                self._feed_one(f, level, dur, lo)
            elif held is None:
                self._level[f] = [level, dur, lo]
            else:
                held[1] += dur

    def _feed_one(self, f: int, level: int, dur: int, start: int) -> None:
        v, w = np.array([float(level)]), np.array([float(dur)])
        for acc in self._accs(f):
            if isinstance(acc, Extreme):
                acc.add_timed(v, np.array([start], dtype=np.int64))
            else:
                acc.add_batch(v, w)

    def _spill(self, f: int) -> None:
        """Frame ``f``'s constant level, if it had one, into its accumulators (something else
        came for it)."""
        held = self._level.pop(f, None)
        if held is None:
            return
        # Pieces of one level: every statistic of time-weighted values (a weighted mean or
        # count, a histogram, quantiles, extremes, first and last) is decided by the level and
        # their total length, so they go in as one piece.
        level, total, start = held
        self._feed_one(f, level, total, start)

    def add_events(self, ev: Events) -> None:
        if not len(ev.t):
            return
        frames = frame_index(ev.t, self.frame_ns)
        self._feed(frames, ev.value.astype(np.float64), None, ev.t)

    def add_times(self, ev: Events) -> None:
        """Items per frame (``count``) or per tenth of a frame (``throughput``).

        Each record accounts for ``ev.value`` items: more than one when records before it were
        refused, so counts stay exact; the missing items are counted at the next record's time.
        """
        if not len(ev.t):
            return
        t, items = ev.t, ev.value.astype(np.float64)
        frames = frame_index(t, self.frame_ns)
        if self.metric == "count":
            self._feed(frames, np.ones(len(t)), items)
            return
        win = ((t - frames * self.frame_ns) * THROUGHPUT_WINDOWS) // self.frame_ns
        key = frames * THROUGHPUT_WINDOWS + win
        uniq, starts = runs(key)  # time-ordered, so keys are non-decreasing
        counts = np.add.reduceat(items, starts)
        for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
            f, w = divmod(k, THROUGHPUT_WINDOWS)
            if f < self.next_frame:
                continue
            arr = self._windows.get(f)
            if arr is None:
                arr = self._windows[f] = np.zeros(THROUGHPUT_WINDOWS)
            arr[w] += c

    def _feed(
        self,
        frames: I64,
        values: NDArray[np.float64],
        weights: NDArray[np.float64] | None,
        times: I64 | None = None,
    ) -> None:
        # Inputs are time-ordered, so frames are non-decreasing: one slice per frame.
        uniq, starts = runs(frames)
        bounds = [*starts.tolist(), len(frames)]
        for i, f in enumerate(uniq.tolist()):
            if f < self.next_frame:
                continue  # a late piece of a closed frame: counted by the engine as late
            lo, hi = bounds[i], bounds[i + 1]
            w = None if weights is None else weights[lo:hi]
            if self._level:
                self._spill(f)
            for acc in self._accs(f):
                if isinstance(acc, Extreme):
                    if times is not None:
                        acc.add_timed(values[lo:hi], times[lo:hi])
                else:
                    acc.add_batch(values[lo:hi], w)

    def close_until(self, t_ns: int, end_ns: int | None = None) -> list[FrameResult]:
        """Emit every frame that ends at or before ``t_ns`` (all frames up to ``end_ns`` at the end)."""
        out: list[FrameResult] = []
        last = (
            (t_ns // self.frame_ns) - 1 if end_ns is None else (max(end_ns - 1, 0) // self.frame_ns)
        )
        while self.next_frame <= last:
            f = self.next_frame
            lo, hi = f * self.frame_ns, (f + 1) * self.frame_ns
            top = hi if end_ns is None else min(hi, end_ns)
            if self.end_ns is not None:
                top = min(top, self.end_ns)
            start = max(lo, self.start_ns)
            covered = max(0, top - start)
            points = self._points(f, (start - lo, max(top, start) - lo))
            if self.crossing:
                points += (
                    ScalarPoint("violations", float(self._violations.pop(f, 0))),
                    ScalarPoint("uncertainty_ns", self._uncertainty.pop(f, 0.0)),
                )
            out.append(FrameResult(self.query_id, self.target, f, lo, hi, covered, points))
            self.next_frame += 1
        return out

    def _points(self, f: int, covered: tuple[int, int]) -> tuple[Point, ...]:
        """Frame ``f``'s points: from its accumulators, or, where it held one level or nothing,
        from the points such a frame has (made once)."""
        specs = self.specs
        if f not in self._open:
            if self.metric == "throughput":
                if f not in self._windows:
                    return _quiet_points(
                        ("rate0", specs, covered), lambda: self._accs_of_throughput(f, covered)
                    )
            else:
                held = self._level.get(f)
                if held is None:
                    return _quiet_points(("none", specs), lambda: [s.create() for s in specs])
                key = ("level", specs, held[0], held[1])
                points = _quiet_points(key, lambda: self._accs_of_level(f))
                self._level.pop(f, None)
                return points
        if self.metric == "throughput":
            self._throughput(f, covered)
        self._spill(f)
        return tuple(a.collect() for a in self._open.pop(f))

    def _accs_of_level(self, f: int) -> list[Accumulator]:
        self._spill(f)
        return self._open.pop(f)

    def _accs_of_throughput(self, f: int, covered: tuple[int, int]) -> list[Accumulator]:
        self._throughput(f, covered)
        return self._open.pop(f)

    def _throughput(self, frame: int, covered: tuple[int, int]) -> None:
        """The frame's rate per window, each weighted by its part of ``covered`` (the span of
        the frame, from its start, the target was observed in)."""
        counts = self._windows.pop(frame, np.zeros(THROUGHPUT_WINDOWS))
        win_ns = self.frame_ns / THROUGHPUT_WINDOWS
        edges = np.arange(THROUGHPUT_WINDOWS + 1) * win_ns
        lo, hi = covered
        weights = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, win_ns)
        keep = weights > 0
        rates = counts[keep] / (weights[keep] * 1e-9)
        for acc in self._accs(frame):
            acc.add_batch(rates, weights[keep])


class ReducerIndex:
    """Every (query, target) reducer of a run, found by (metric, target): what the streams'
    ``feed`` hooks are given (``reduction/streams.py``)."""

    def __init__(self, reducers: Sequence[TargetReducer] = ()) -> None:
        self.all: list[TargetReducer] = []
        self._by: dict[tuple[str, str], list[Sink]] = {}
        #: Targets that ended, and when (virtual ns): their reducers go after their last frame.
        self._ending: dict[str, int] = {}
        #: When the next frame of any reducer ends: before it, ``close_until`` has nothing to
        #: emit and looks at no reducer.
        self._due = 0
        for r in reducers:
            self.add(r)

    def add(self, r: TargetReducer) -> None:
        self._due = min(self._due, (r.next_frame + 1) * r.frame_ns)
        self.all.append(r)
        self._by.setdefault((r.metric, r.target), []).append(r)

    def tap(self, metric: str, target: str, sink: Sink) -> None:
        """``sink`` is fed what (``metric``, ``target``)'s reducers are (a figure made of other
        targets' outputs: ``reduction/littlepath.py``); it emits no frames itself."""
        self._by.setdefault((metric, target), []).append(sink)

    def __len__(self) -> int:
        return len(self.all)

    def __call__(self, metric: str, target: str) -> Sequence[Sink]:
        return self._by.get((metric, target), ())

    def _reducers(self, target: str) -> list[TargetReducer]:
        return [r for m in METRICS for r in self._by.get((m, target), ())
                if isinstance(r, TargetReducer)]  # fmt: skip

    def grow(self, plan: Plan, added: Sequence[tuple[int, TargetPlan]], wm: int) -> Plan:
        """New targets of ``plan``'s queries (stages and channels that appeared while the run
        went on): a reducer each, from the frame the watermark ``wm`` is in; returns the plan
        with them (``Plan.grown``)."""
        by_id = {q.id: q for q in plan.queries}
        for qid, target in added:
            q = by_id[qid]
            r = TargetReducer(q.id, q.metric, target.name, target.specs, q.frame_ns)
            r.next_frame, r.start_ns = wm // q.frame_ns, wm
            self.add(r)  # its next frame set first: it is due when that frame ends
        return plan.grown(added)

    def close_until(self, t_ns: int, end_ns: int | None = None) -> list[FrameResult]:
        """Every reducer's frames that end by ``t_ns`` (all of them up to ``end_ns``); the
        reducers of a target that ended (``end``) go once their frame holding its end is out."""
        if end_ns is None and t_ns < self._due:
            return []
        out = [f for r in self.all for f in r.close_until(t_ns, end_ns)]
        self._due = min(((r.next_frame + 1) * r.frame_ns for r in self.all), default=0)
        if self._ending:
            done = {
                id(r) for r in self.all
                if r.target in self._ending and r.next_frame * r.frame_ns > self._ending[r.target]
            }  # fmt: skip
            if done:
                self.all = [r for r in self.all if id(r) not in done]
                for key in [k for k, rs in self._by.items() if any(id(r) in done for r in rs)]:
                    kept = [r for r in self._by[key] if id(r) not in done]
                    if kept:
                        self._by[key] = kept
                    else:
                        del self._by[key]
                live = {r.target for r in self.all}
                self._ending = {t: e for t, e in self._ending.items() if t in live}
        return out

    def rewind(self, target: str, start_ns: int) -> None:
        """``target`` (a channel none of whose frames went out) begins at ``start_ns``: its
        reducers emit frames from the one holding it (earlier or later than they took it to
        begin)."""
        for r in self._reducers(target):
            f = start_ns // r.frame_ns
            r.start_ns = start_ns
            if f < r.next_frame:
                r.next_frame = f
                self._due = min(self._due, (f + 1) * r.frame_ns)

    def end(self, target: str, end_ns: int) -> None:
        """``target`` (a channel a program dropped) ended at ``end_ns``: its reducers emit their
        frames up to the one holding its end, then go (a program making thousands of queues
        keeps frames for those alive, not for every one it ever made); the last of them covers
        its part up to the end."""
        self._ending[target] = end_ns
        for r in self._reducers(target):
            r.end_ns = end_ns if r.end_ns is None else min(r.end_ns, end_ns)
