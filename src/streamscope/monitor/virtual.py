"""Virtual queues: a link channel's occupancy, estimated per frame by simulation (Lancaster,
Wingbermuehle, Beard & Chamberlain, Crossing Boundaries in TimeTrial, 2011).

In: per-frame summaries of the channel's two visible sub-queues (the tail buffer at the
producer's side, the head buffer at the consumer's side), reduced either here (a side on the
host: from its raw records, in virtual ns) or on the device (SUMMARY messages, in its ticks, on
the host's frame grid). Out: per frame, the predicted occupancy of the whole queue (answering the
query's aggregations), the self-check of the model against the measured sub-queues, and rows
for the ``vq_frame``/``vq_level``/``virtual_queue`` tables. With ground truth (validation runs
only, read after the last frame has been estimated), the distance to the true occupancy.

The model draws the insertions from the tail's insertion profile where its summary has one
("profile": bursts and rate changes as measured), else i.i.d. from its gap histogram (the
paper's "renewal" model). The renewal model is kept beside the profile one, with its own
self-check, whose dependence test (pooled over the run as well) says whether i.i.d. gaps would
have done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import FrameResult, Point
from streamscope.aggregate.specs import AggregationSpec
from streamscope.aggregate.subqueue import PROFILE_BINS, SubQueueFrames, SubQueueSummary
from streamscope.core.numeric import dot
from streamscope.core.tablerows import TableSink
from streamscope.core.topology import HOST, ChannelInfo, Topology
from streamscope.model import Bus
from streamscope.model.estimator import Profile
from streamscope.model.selfcheck import TOLERANCE
from streamscope.monitor.vqmodel import F64, FrameInputs, FrameModels
from streamscope.monitor.vqtables import VQTables
from streamscope.query.plan import Plan
from streamscope.timebase.domains import Domains


@dataclass(slots=True)
class _Side:
    """One sub-queue: reduced here (``frames`` set) or on a device (``domain`` names it);
    mutable: its summaries come and go frame by frame."""

    domain: str
    insert_probe: int
    remove_probe: int
    state_probe: int
    frames: SubQueueFrames | None
    got: dict[int, SubQueueSummary]


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
        tolerance: float = TOLERANCE,
    ) -> None:
        """``key``: 2 x the channel's index (tail side; +1 the head side). ``sides``: per side,
        (clock domain, insert probe, remove probe, producer state probe or 0)."""
        self.channel = channel
        self.key = key
        self.queries = queries
        self.frame_ns = frame_ns
        self.on_table = on_table
        bus = Bus(
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
        self.keep_truth = keep_truth
        self.models = FrameModels(bus, seed, key, keep_truth, tolerance)
        self.tables = VQTables(channel.name, [q for q, _ in queries], frame_ns, on_table)

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
            self.tables.truth(
                truth_dir, end_ns, float(domains.host.t0_ticks), self.key, self.models
            )
        self.tables.write_frames()
        self.tables.write_run(self.models)
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
        row = _frame_row(frame, tail, head)
        levels: dict[str, F64] = {}
        extra: list[Point] = []
        whole: F64 | None = None
        if tail is not None and head is not None and covered > 0:
            final = end_ns is not None and end_ns <= hi
            inputs = frame_inputs(
                tail, head, (tail_scale, head_scale), covered, end_ns is not None, final, frame == 0
            )
            if inputs is not None:
                whole = self.models.model(
                    row, levels, extra, tail, head, inputs, max(tail_mis, head_mis), frame, covered
                )
        self.tables.frame_rows.append(row)
        self.tables.write_levels(frame, levels)
        if not self.keep_truth:
            self.tables.write_frames()
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

    # -- tables ------------------------------------------------------------------------------


def _mean(level_ticks: NDArray[Any]) -> float:
    w = np.asarray(level_ticks, dtype=np.float64)
    total = float(w.sum())
    return dot(np.arange(w.size), w) / total if total > 0 else 0.0


def _covered_ns(s: SubQueueSummary, scale: float) -> float:
    return s.covered_ticks * s.tick_ns * scale


def _profile(s: SubQueueSummary, scale: float) -> Profile | None:
    """The summary's insertion profile in fitted ns from the frame start, if it has one."""
    if s.profile is None or s.end_ticks <= s.start_ticks:
        return None
    span_ns = (s.end_ticks - s.start_ticks) * s.tick_ns * scale
    return Profile(s.profile, span_ns / s.profile.size)


def _frame_row(
    frame: int, tail: SubQueueSummary | None, head: SubQueueSummary | None
) -> dict[str, Any]:
    """A ``vq_frame`` row as the measured sub-queues fill it (the models fill the rest)."""
    return {
        "frame": frame, "model": "tandem", "arrivals": None, "verdict": None,
        "w1_items": None, "tv": None, "threshold_items": None, "null_quantile_items": None,
        "clock_bias_items": None, "decided_by": None, "excess_items": None,
        "tolerance_items": None, "band_items": None, "predicted_mean": None, "ideal_mean": None,
        "tail_mean": _mean(tail.level_ticks) if tail else None,
        "head_mean": _mean(head.level_ticks) if head else None,
        "items_in": tail.n_in if tail else 0, "items_out": head.n_out if head else 0,
        "truth_mean": None, "w1_truth_items": None, "w1_truth_ideal_items": None,
        "renewal_verdict": None, "dependence_p": None, "renewal_mean": None,
        "w1_truth_renewal_items": None,
    }  # fmt: skip


#: A producer's side whose frame covers less than the frame and the consumer's side by more
#: than this share has ended in it (its process finished).
ENDED_SHARE = 0.01


def frame_inputs(
    tail: SubQueueSummary,
    head: SubQueueSummary,
    scales: tuple[float, float],
    covered: int,
    ending: bool,
    final: bool,
    first: bool,
) -> FrameInputs | None:
    """A frame's model inputs from its two sub-queues' summaries (``scales``: from each side's
    nominal ns to the host's), ``covered`` ns of it in the run; ``ending``: the run has ended
    (its frames are being finished), ``final``: in this frame, ``first``: the run's first
    frame. None where nothing can be modelled."""
    tail_scale, head_scale = scales
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
    if (arrivals is None and profile is None) or service is None or not length:
        return None
    # A side's records end with its process: in the run's last frame the queue is estimated
    # up to the run's end (the model drains it), each side checked over what it measured. So
    # too where the producer's side ended in a frame the run goes on past (a device's source
    # that finished while the host still drains the link): estimated over the whole frame,
    # its insertions ending with the last one measured, not over the producer's part alone.
    stopped = not first and tail_ns < min(covered, head_ns) * (1.0 - ENDED_SHARE)
    final = final or stopped
    span = float(covered) if ending else float(min(covered, head_ns)) if stopped else length
    sides = (min(tail_ns, span), min(head_ns, span))
    windows = sides if min(sides) < span else None
    return FrameInputs(arrivals, assumed, service, profile, span, windows, final, final or first)


def virtual_queues(
    topology: Topology,
    plan: Plan,
    on_table: TableSink | None,
    keep_truth: bool,
    tolerance: float = TOLERANCE,
) -> dict[str, VirtualQueue]:
    """A ``VirtualQueue`` for every link channel that an occupancy query targets
    (``tolerance``: of each frame's verdict, as a share of its estimate)."""
    where = topology.stage_domains()
    probe = {(p.kind, p.target): p.id for p in topology.probes}
    index = {c.name: i for i, c in enumerate(topology.channels)}
    wanted: dict[str, list[tuple[int, tuple[AggregationSpec, ...]]]] = {}
    for q, t in plan.estimated:
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
            ch, 2 * index[name], queries, frame_ns, sides, on_table, keep_truth=keep_truth,
            tolerance=tolerance,
        )  # fmt: skip
    return out
