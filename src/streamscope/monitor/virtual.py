"""Virtual queues: a link channel's occupancy, estimated per frame by simulation (seed 002).

In: per-frame summaries of the channel's two visible sub-queues (the tail buffer at the
producer's side, the head buffer at the consumer's side), reduced either here (a side on the
host: from its raw records, in virtual ns) or on the device (SUMMARY messages, in its ticks, on
the host's frame grid). Out: per frame, the predicted occupancy of the whole queue (answering the
query's aggregations), the self-check of the model against the measured sub-queues, and rows
for the ``vq_frame``/``vq_level``/``virtual_queue`` tables. With ground truth (validation runs
only, read after the last frame has been estimated), the distance to the true occupancy.

The model draws the insertions from the tail's insertion profile where its summary has one
("profile": bursts and rate changes as measured), else i.i.d. from its gap histogram (the
seed's "renewal" model). The renewal model is kept beside the profile one, with its own
self-check, whose dependence test (pooled over the run as well) says whether i.i.d. gaps would
have done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import FrameResult, Point, ScalarPoint
from streamscope.aggregate.specs import AggregationSpec
from streamscope.aggregate.subqueue import PROFILE_BINS, SubQueueFrames, SubQueueSummary
from streamscope.core.topology import ChannelInfo, Topology
from streamscope.model import Bus, combine_frames, occupancy_from_events, predict, self_check
from streamscope.model import w1_items as w1
from streamscope.model.estimator import (
    Arrivals,
    HistogramLike,
    Prediction,
    Profile,
    SubQueues,
    condition,
    replicates,
    summarise,
)
from streamscope.model.selfcheck import DependencePool, FrameVerdict
from streamscope.query.compile import Plan
from streamscope.timebase.domains import HOST, Domains, TableSink

F64 = NDArray[np.float64]
#: Level of each frame's self-check (and of the run's binomial test over frames).
ALPHA = 0.05
SIDES = ("tail", "head")
#: Replications of a model per frame (its prediction, and the null of its self-check, each
#: replication against the others: 39 makes the 95 % quantile exact), and how many of those
#: nearest the measured sub-queues make the profile model's estimate.
REPLICATIONS = 39
NEAREST = 10
#: Spacing inside a sub-window when a frame's insertions left no gap to sample (at most one
#: insertion, or refused records): uniform.
_FLAT: HistogramLike = (np.array([0.0, 1.0]), np.ones(1))


@dataclass(slots=True)
class _Side:
    """One sub-queue: reduced here (``frames`` set) or on a device (``domain`` names it)."""

    domain: str
    insert_probe: int
    remove_probe: int
    state_probe: int
    frames: SubQueueFrames | None
    got: dict[int, SubQueueSummary]


@dataclass(slots=True)
class _Estimate:
    frame: int
    whole: F64
    ideal: F64
    renewal: F64 | None
    covered_ns: int


@dataclass(frozen=True, slots=True)
class _Inputs:
    """One frame's model inputs: the gap histogram (None: none; ``assumed``: made up, as no gap
    was measured), the service histogram, the insertion profile (None: not measured), and the
    windows (ns from the frame start) of the checks and of the estimate."""

    arrivals: HistogramLike | None
    assumed: bool
    service: HistogramLike
    profile: Profile | None
    span: float  #: the window of the estimate (the frame's, when it is the run's last)
    windows: tuple[float, float] | None  #: the tail's and head's, where shorter than the span
    final: bool  #: the run's last frame (its producer stops in it)
    edge: bool  #: the run's first or last frame (its producer starts or stops in it)


def _fractions(levels_weight: NDArray[Any]) -> F64:
    w = np.asarray(levels_weight, dtype=np.float64)
    total = float(w.sum())
    return w / total if total > 0 else np.ones(1)


class VirtualQueue:
    """Every occupancy query on one link channel."""

    def __init__(
        self,
        channel: ChannelInfo,
        key: int,
        queries: list[tuple[int, tuple[AggregationSpec, ...]]],
        frame_ns: int,
        sides: dict[str, tuple[str, int, int, int]],
        on_table: TableSink | None,
        *,
        seed: int = 0,
        keep_truth: bool = False,
    ) -> None:
        """``key``: 2 x the channel's index (tail side; +1 the head side). ``sides``: per side,
        (clock domain, insert probe, remove probe, producer state probe or 0)."""
        self.channel = channel
        self.key = key
        self.queries = queries
        self.frame_ns = frame_ns
        self.on_table = on_table
        self.seed = seed
        self.bus = Bus(
            channel.bulk_size,
            channel.transfer_ns,
            math.inf if channel.timeout_ns is None else channel.timeout_ns,
            latency_ns=channel.latency_ns,
            capacity2=channel.capacity if channel.bulk_size <= channel.capacity + 1 else None,
        )
        self.sides: dict[str, _Side] = {}
        for side, (domain, ins, rem, state) in sides.items():
            frames = None
            if domain == HOST:
                frames = SubQueueFrames(1.0, states=state != 0, profile=PROFILE_BINS)
                frames.set_grid(0.0, float(frame_ns))
            self.sides[side] = _Side(domain, ins, rem, state, frames, {})
        self.next_frame = 0
        self.verdicts: list[FrameVerdict] = []
        self.renewal_verdicts: list[FrameVerdict] = []
        self.dependence = DependencePool()
        self.w1_sum = 0.0
        self.keep_truth = keep_truth
        self.estimates: list[_Estimate] = []
        self.frame_rows: list[dict[str, Any]] = []
        self._truth_w1: list[tuple[float, float, float]] = []

    # -- input -------------------------------------------------------------------------------

    def probes(self) -> dict[int, tuple[str, str]]:
        """Probe id -> (side, role) for the sides reduced here."""
        out: dict[int, tuple[str, str]] = {}
        for name, s in self.sides.items():
            if s.frames is None:
                continue
            out[s.insert_probe] = (name, "insert")
            out[s.remove_probe] = (name, "remove")
            if s.state_probe:
                out[s.state_probe] = (name, "state")
        return out

    def add_records(self, side: str, role: str, t: NDArray[np.int64], v: NDArray[np.int64]) -> None:
        frames = self.sides[side].frames
        assert frames is not None
        if role == "insert":
            frames.add_insertions(t, v)
        elif role == "remove":
            frames.add_removals(t, v)
        else:
            frames.add_states(t, v)

    def add_summaries(self, side: str, summaries: list[SubQueueSummary]) -> None:
        got = self.sides[side].got
        for s in summaries:
            got[s.frame] = s

    # -- output ------------------------------------------------------------------------------

    def advance(self, wm: int, domains: Domains) -> list[FrameResult]:
        for s in self.sides.values():
            if s.frames is not None:
                for summ in s.frames.close_until(wm):
                    s.got[summ.frame] = summ
        out: list[FrameResult] = []
        while all(self.next_frame in s.got for s in self.sides.values()):
            out += self._emit(self.next_frame, domains, None)
        return out

    def finish(self, end_ns: int, domains: Domains, truth_dir: str | None) -> list[FrameResult]:
        for s in self.sides.values():
            if s.frames is not None:
                for summ in s.frames.finish(end_ns):
                    s.got[summ.frame] = summ
        out: list[FrameResult] = []
        last = max(end_ns - 1, 0) // self.frame_ns
        while self.next_frame <= last:
            out += self._emit(self.next_frame, domains, end_ns)
        if truth_dir is not None and domains.host is not None:
            self._truth(truth_dir, end_ns, float(domains.host.t0_ticks))
        self._write_frames()
        self._write_run()
        return out

    def _side_view(
        self, side: _Side, frame: int, domains: Domains
    ) -> tuple[SubQueueSummary | None, float, float]:
        """The side's summary of ``frame``, the scale from its nominal to fitted ns, and how far
        its frame edges may be from the host's (ns)."""
        summ = side.got.pop(frame, None)
        if summ is None or side.domain == HOST:
            return summ, 1.0, 0.0
        ticks = np.array([summ.start_ticks, summ.end_ticks], dtype=np.int64)
        t, halfwidth = domains.to_ns(side.domain, ticks)
        span = summ.end_ticks - summ.start_ticks
        scale = float(t[1] - t[0]) / (span * summ.tick_ns) if span > 0 else 1.0
        lo, hi = frame * self.frame_ns, (frame + 1) * self.frame_ns
        misalign = max(abs(int(t[0]) - lo), abs(int(t[1]) - hi)) + halfwidth
        return summ, scale, float(misalign)

    def _emit(self, frame: int, domains: Domains, end_ns: int | None) -> list[FrameResult]:
        self.next_frame = frame + 1
        lo, hi = frame * self.frame_ns, (frame + 1) * self.frame_ns
        covered = hi - lo if end_ns is None else max(0, min(hi, end_ns) - lo)
        views = {name: self._side_view(s, frame, domains) for name, s in self.sides.items()}
        tail, tail_scale, tail_mis = views["tail"]
        head, head_scale, head_mis = views["head"]
        row: dict[str, Any] = {
            "frame": frame, "model": "tandem", "arrivals": None, "verdict": None,
            "w1_items": None, "tv": None, "threshold_items": None, "null_quantile_items": None,
            "clock_bias_items": None, "predicted_mean": None, "ideal_mean": None,
            "tail_mean": _mean(tail.level_ticks) if tail else None,
            "head_mean": _mean(head.level_ticks) if head else None,
            "items_in": tail.n_in if tail else 0, "items_out": head.n_out if head else 0,
            "truth_mean": None, "w1_truth_items": None, "w1_truth_ideal_items": None,
            "renewal_verdict": None, "dependence_p": None, "renewal_mean": None,
            "w1_truth_renewal_items": None,
        }  # fmt: skip
        levels: dict[str, F64] = {}
        extra: list[Point] = []
        whole: F64 | None = None
        if tail is not None and head is not None and covered > 0:
            arrivals = tail.histogram("gap_prod", scale=tail_scale)
            if arrivals is None:
                arrivals = tail.histogram("gap_in", scale=tail_scale)
            service = head.histogram("gap_out", scale=head_scale)
            tail_ns, head_ns = _covered_ns(tail, tail_scale), _covered_ns(head, head_scale)
            length = float(min(covered, tail_ns, head_ns))
            assumed = arrivals is None
            if assumed and tail.n_in <= 1 and length > 0:
                # No gap to sample: at most one insertion in the frame. Modelled as none, so the
                # prediction is the start levels draining (one item's arrival is lost), and the
                # frame is not self-checked: an assumed input cannot be tested. (Where the
                # profile places the insertion, it is the model used instead.)
                arrivals = (np.array([2.0 * length, 2.0 * length + 1.0]), np.ones(1))
            if service is None and length > 0:
                # The head buffer never held two items at a removal: the consumer kept up with
                # what reached it, so its service never delayed anything. Modelled as instant.
                service = (np.array([0.0, 1.0]), np.ones(1))
            profile = _profile(tail, tail_scale)
            if (arrivals is not None or profile is not None) and service is not None and length:
                # A side's records end with its process: in the run's last frame the queue is
                # estimated up to the run's end (the model drains it), each side checked over
                # what it measured.
                span = float(covered) if end_ns is not None else length
                sides = (min(tail_ns, span), min(head_ns, span))
                windows = sides if min(sides) < span else None
                final = end_ns is not None and end_ns <= hi
                edge = final or frame == 0
                inputs = _Inputs(arrivals, assumed, service, profile, span, windows, final, edge)
                whole = self._model(
                    row, levels, extra, tail, head, inputs, max(tail_mis, head_mis), frame, covered
                )
        self.frame_rows.append(row)
        self._write_levels(frame, levels)
        if not self.keep_truth:
            self._write_frames()
        results = []
        for query_id, specs in self.queries:
            accs = [s.create() for s in specs]
            if whole is not None:
                lv = np.arange(whole.size, dtype=np.float64)
                for acc in accs:
                    acc.add_batch(lv, whole * covered)
            points: tuple[Point, ...] = tuple(a.collect() for a in accs) + tuple(extra)
            results.append(FrameResult(query_id, self.channel.name, frame, lo, hi, covered, points))
        return results

    def _model(
        self,
        row: dict[str, Any],
        levels: dict[str, F64],
        extra: list[Point],
        tail: SubQueueSummary,
        head: SubQueueSummary,
        x: _Inputs,
        misalign_ns: float,
        frame: int,
        covered: int,
    ) -> F64:
        """One frame's models and checks: fills ``row``, ``levels`` and ``extra``; returns the
        predicted whole-queue level fractions.

        The model used draws the insertions from the profile where there is one, else i.i.d.
        from the gap histogram (the seed's renewal model); the renewal model is also run and
        checked beside the profile one, as a diagnostic (its dependence tests pooled, but for
        the run's first and last frames: a producer that starts or stops is no dependence
        between its gaps). The
        profile model's estimate is its replications nearest the measured ends (``condition``);
        its check, as the seed's, takes their mean."""
        rng = np.random.default_rng((self.seed, self.key, frame))
        st, sh = tail.level_start, head.level_start
        # An assumed input models no insertion: a whole gap, longer than the frame.
        common: dict[str, Any] = {
            "start_tail": st, "start_head": sh, "residual": not x.assumed, "windows": x.windows,
        }  # fmt: skip
        length = x.span
        mt, mh = _fractions(tail.level_ticks), _fractions(head.level_ticks)

        def tandem(h: HistogramLike, profile: Profile | None) -> list[tuple[SubQueues, int]]:
            # In the run's last frame the producer has finished: the profile's last insertion
            # ends its stream, and the bus sends what waits at once (as a link does at the end).
            ended = x.final and profile is not None
            return replicates(h, x.service, length, "tandem", self.bus, rng, REPLICATIONS,
                              profile=profile, ended=ended, **common)  # fmt: skip

        renewal: Prediction | None = None
        renewal_runs: list[tuple[SubQueues, int]] | None = None
        use: Arrivals = "renewal"
        if x.profile is not None:
            use = "profile"
            # The profile places every insertion; without a measured gap, only the spacing
            # inside a sub-window is made up.
            drawn = _FLAT if x.assumed or x.arrivals is None else x.arrivals
            runs = tandem(drawn, x.profile)
            pred = summarise(runs, "tandem", use)
            est = condition(runs, mt, mh, NEAREST, "tandem", use)
            ideal = predict(drawn, x.service, length, rng, model="ideal", profile=x.profile,
                            **common)  # fmt: skip
            if x.arrivals is not None:
                renewal_runs = tandem(x.arrivals, None)
                renewal = summarise(renewal_runs, "tandem", "renewal")
        else:
            assert x.arrivals is not None
            drawn = x.arrivals
            runs = renewal_runs = tandem(drawn, None)
            est = pred = renewal = summarise(runs, "tandem", use)
            ideal = predict(drawn, x.service, length, rng, model="ideal", **common)
        bias = head.n_out / (length if x.windows is None else x.windows[1]) * misalign_ns
        whole = np.asarray(est.whole, dtype=np.float64)
        levels.update(
            predicted=whole, ideal=np.asarray(ideal.whole), tail=mt, head=mh,
            tail_predicted=np.asarray(pred.tail), head_predicted=np.asarray(pred.head),
        )  # fmt: skip
        if renewal is not None and renewal is not pred:
            levels["renewal"] = np.asarray(renewal.whole)
        row.update(
            arrivals=use, predicted_mean=est.mean_occupancy, ideal_mean=ideal.mean_occupancy,
            renewal_mean=None if renewal is None else renewal.mean_occupancy,
        )  # fmt: skip
        check: dict[str, Any] = {
            "model": "tandem", "bus": self.bus, "alpha": ALPHA, "clock_bias_items": bias,
            "start_tail": st, "start_head": sh, "profile": x.profile, "windows": x.windows,
        }  # fmt: skip
        if use == "profile" or not x.assumed:
            v = self_check(drawn, x.service, length, mt, mh, rng, runs=runs, arrivals=use, **check)
            self.verdicts.append(v)
            self.w1_sum += v.w1_items
            row.update(
                verdict=v.verdict, w1_items=v.w1_items, tv=v.tv,
                threshold_items=v.threshold_items, null_quantile_items=v.null_quantile_items,
                clock_bias_items=v.clock_bias_items,
            )  # fmt: skip
            extra += [
                ScalarPoint("w1_items", v.w1_items),
                ScalarPoint("threshold_items", v.threshold_items),
                ScalarPoint("clock_bias_items", v.clock_bias_items),
                ScalarPoint("rejected", 1.0 if v.verdict == "rejected" else 0.0),
            ]
            rv: FrameVerdict | None = v if use == "renewal" else None
            if (
                use == "profile"
                and x.arrivals is not None
                and renewal_runs is not None
                and not x.assumed
            ):
                # The seed's model on the same frame: would i.i.d. gaps have done?
                rv = self_check(
                    x.arrivals, x.service, length, mt, mh, rng, runs=renewal_runs,
                    arrivals="renewal", pool=None if x.edge else self.dependence, **check,
                )  # fmt: skip
            if rv is not None:
                self.renewal_verdicts.append(rv)
                row.update(
                    renewal_verdict=rv.verdict,
                    dependence_p=None if rv.dependence is None else rv.dependence.p_value,
                )
        if self.keep_truth:
            self.estimates.append(
                _Estimate(frame, whole, np.asarray(ideal.whole),
                          None if renewal is None else np.asarray(renewal.whole), covered)
            )  # fmt: skip
        return whole

    # -- tables ------------------------------------------------------------------------------

    def _write_levels(self, frame: int, levels: dict[str, F64]) -> None:
        if self.on_table is None or not levels:
            return
        rows: dict[str, list[Any]] = {
            k: [] for k in ("query_id", "target", "frame", "series", "level", "fraction")
        }
        for query_id, _ in self.queries[:1]:
            for series, frac in levels.items():
                n = len(frac)
                rows["query_id"] += [query_id] * n
                rows["target"] += [self.channel.name] * n
                rows["frame"] += [frame] * n
                rows["series"] += [series] * n
                rows["level"] += list(range(n))
                rows["fraction"] += [float(x) for x in frac]
        self.on_table("vq_level", rows)

    def _write_frames(self) -> None:
        if self.on_table is None or not self.frame_rows:
            return
        cols: dict[str, list[Any]] = {}
        for query_id, _ in self.queries[:1]:
            for r in self.frame_rows:
                full = {"query_id": query_id, "target": self.channel.name, **r}
                for k, v in full.items():
                    cols.setdefault(k, []).append(v)
        self.on_table("vq_frame", cols)
        self.frame_rows = []

    def _write_run(self) -> None:
        if self.on_table is None:
            return
        run = combine_frames(self.verdicts, ALPHA)
        pooled = self.dependence.result()
        renewal = combine_frames(self.renewal_verdicts, ALPHA, pooled)
        w1_truth = np.array(self._truth_w1, dtype=np.float64).reshape(-1, 3)
        means: list[float | None] = [
            float(np.nanmean(c)) if np.isfinite(c).any() else None for c in w1_truth.T
        ]
        for query_id, _ in self.queries[:1]:
            self.on_table(
                "virtual_queue",
                {
                    "query_id": [query_id], "target": [self.channel.name], "model": ["tandem"],
                    "verdict": [run.verdict], "frames": [run.frames],
                    "frames_rejected": [run.frames_rejected], "alpha": [run.alpha],
                    "p_value": [run.p_value],
                    "w1_items": [self.w1_sum / len(self.verdicts) if self.verdicts else None],
                    "w1_truth_items": [means[0]], "w1_truth_ideal_items": [means[1]],
                    "renewal_verdict": [renewal.verdict if renewal.frames else None],
                    "dependence_p": [pooled.p_value if pooled else None],
                    "w1_truth_renewal_items": [means[2]],
                },
            )  # fmt: skip

    def _truth(self, truth_dir: str, end_ns: int, t0_ns: float) -> None:
        """The true occupancy per frame (validation only; never an input to the estimate)."""
        idx = self.key // 2
        ins_path, out_path = Path(truth_dir) / f"{idx}-in.npy", Path(truth_dir) / f"{idx}-out.npy"
        if not (ins_path.is_file() and out_path.is_file()):
            return
        a = np.load(ins_path).astype(np.float64) - t0_ns
        d = np.load(out_path).astype(np.float64) - t0_ns
        if d.size < a.size:  # items never removed stay to the end
            d = np.concatenate((d, np.full(a.size - d.size, float(end_ns))))
        d = d[: a.size]
        by_frame = {e.frame: e for e in self.estimates}
        for r in self.frame_rows:
            f = r["frame"]
            lo, hi = f * self.frame_ns, min((f + 1) * self.frame_ns, end_ns)
            if hi <= lo:
                continue
            levels, ns = occupancy_from_events(a, d, float(lo), float(hi))
            true = ns / ns.sum() if ns.sum() > 0 else ns
            r["truth_mean"] = float(np.dot(levels, true))
            e = by_frame.get(f)
            if e is not None:
                r["w1_truth_items"] = w1(e.whole, true)
                r["w1_truth_ideal_items"] = w1(e.ideal, true)
                r["w1_truth_renewal_items"] = None if e.renewal is None else w1(e.renewal, true)
                self._truth_w1.append(
                    (r["w1_truth_items"], r["w1_truth_ideal_items"],
                     np.nan if e.renewal is None else r["w1_truth_renewal_items"])
                )  # fmt: skip
            self._write_levels(f, {"truth": true})


def _mean(level_ticks: NDArray[Any]) -> float:
    w = np.asarray(level_ticks, dtype=np.float64)
    total = float(w.sum())
    return float(np.dot(np.arange(w.size), w) / total) if total > 0 else 0.0


def _covered_ns(s: SubQueueSummary, scale: float) -> float:
    return s.covered_ticks * s.tick_ns * scale


def _profile(s: SubQueueSummary, scale: float) -> Profile | None:
    """The summary's insertion profile in fitted ns from the frame start, if it has one."""
    if s.profile is None or s.end_ticks <= s.start_ticks:
        return None
    span_ns = (s.end_ticks - s.start_ticks) * s.tick_ns * scale
    return Profile(s.profile, span_ns / s.profile.size)


def virtual_queues(
    topology: Topology, plan: Plan, on_table: TableSink | None, keep_truth: bool
) -> dict[str, VirtualQueue]:
    """A ``VirtualQueue`` for every link channel that an occupancy query targets."""
    where = topology.stage_domains()
    probe = {(p.kind, p.target): p.id for p in topology.probes}
    index = {c.name: i for i, c in enumerate(topology.channels)}
    wanted: dict[str, list[tuple[int, tuple[AggregationSpec, ...]]]] = {}
    for q, t in plan.estimated(topology):
        wanted.setdefault(t.name, []).append((q.id, t.specs))
    out: dict[str, VirtualQueue] = {}
    for name, queries in wanted.items():
        ch = topology.channel(name)
        sides = {
            "tail": (where[ch.src], probe.get(("tail", name), 0), probe.get(("send", name), 0),
                     probe.get(("state", ch.src), 0)),
            "head": (where[ch.dst], probe.get(("deliver", name), 0), probe.get(("head", name), 0),
                     0),
        }  # fmt: skip
        frame_ns = min(q.frame_ns for q in plan.queries if q.id in {i for i, _ in queries})
        out[name] = VirtualQueue(
            ch, 2 * index[name], queries, frame_ns, sides, on_table, keep_truth=keep_truth
        )
    return out
