"""Cross-clock latency frames held to an exactly known truth (shared by the clock benchmarks
and the timezone tests).

In: each item's true insertion and removal time (host ns), the frame grid's zero, the device
tick's length in host ns and the frames a monitor reported for ``latency(...)`` with ``p50``,
``min`` and ``max``; or a validation run's file, which holds all of these. Out: how many
frames were checked, how many had a median or an extreme outside the frame's reported
uncertainty of the truth, the worst excess, negative latencies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import streamscope as ss
from streamscope.aggregate.points import FrameResult, QuantilesPoint, ScalarPoint
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

#: Times are whole ns and each conversion rounds: two ns of slack on top of the bounds.
SLACK_NS = 2.0


def lower_median(x: np.ndarray) -> float:
    """The median as the monitor defines its quantiles: the smallest value whose cumulative
    count reaches half the count (the inverted distribution function)."""
    return float(np.sort(x)[math.ceil(0.5 * len(x)) - 1])


def _stats(frames: Sequence[FrameResult]) -> dict[int, dict[str, float | None]]:
    """Per frame: its scalar points and quantiles by name (``q0.5`` for the median)."""
    out: dict[int, dict[str, float | None]] = {}
    for fr in frames:
        stats: dict[str, float | None] = {
            p.stat: p.value for p in fr.points if isinstance(p, ScalarPoint)
        }
        for p in fr.points:
            if isinstance(p, QuantilesPoint):
                stats.update({f"q{q}": v for q, v in zip(p.qs, p.values, strict=True)})
        out[fr.frame] = stats
    return out


def _median_range(sure: np.ndarray, maybe: np.ndarray) -> tuple[float, float]:
    """The lowest and highest median of ``sure`` with any subset of ``maybe`` added: the
    lowest adds some of the smallest of ``maybe``, the highest some of the largest."""
    maybe = np.sort(maybe)
    low = [np.concatenate([sure, maybe[:k]]) for k in range(len(maybe) + 1)]
    high = [np.concatenate([sure, maybe[len(maybe) - k :]]) for k in range(len(maybe) + 1)]
    return (
        min(lower_median(x) for x in low if len(x)),
        max(lower_median(x) for x in high if len(x)),
    )


def check(
    inserted: np.ndarray,
    removed: np.ndarray,
    t0_ns: int,
    frame_ns: int,
    tick_ns: float,
    frames: Sequence[FrameResult],
    removed_latest: np.ndarray | None = None,
    inserted_latest: np.ndarray | None = None,
) -> tuple[int, int, float, int]:
    """(frames checked, frames where a median or extreme lies outside its uncertainty of the
    truth, the worst excess in ns, negative latencies). ``removed`` is when the device really
    read each removal's tick: the event lies within one tick after it. ``removed_latest``: the
    latest it can have been, where the tick alone cannot say (a reading shortly after a
    backward step repeats positions): the truth is then the interval between the two.
    ``inserted_latest`` likewise for the insertions (``inserted`` is then the earliest): where
    the truth is a pair of stamps around each event, every latency lies in [earliest removal -
    latest insertion, latest removal - earliest insertion], and never below 0. A figure not in
    a frame (a query without ``min``, say) is not checked.

    The monitor puts each removal in the frame its estimated time falls in, and that estimate
    is as uncertain as the frame says: a removal within that uncertainty of a frame's edge may
    be counted on either side, so a frame's truth is the range its figures take over every
    such choice (a median: over adding any of those removals; an extreme: likewise).
    """
    late = removed if removed_latest is None else removed_latest
    lat = np.maximum(removed - (inserted if inserted_latest is None else inserted_latest), 0)
    lat_late = late - inserted
    tick_host = tick_ns * 1.001  # a reading is the tick it lies in
    by_frame = _stats(frames)
    reach = {k: float(st.get("uncertainty_ns") or 0.0) + tick_host + SLACK_NS
             for k, st in by_frame.items()}  # fmt: skip
    checked = missed = negative = 0
    worst = 0.0
    for k, stats in sorted(by_frame.items()):
        for name in ("q0.5", "min", "max"):
            negative += float(stats.get(name) or 0.0) < 0
        if stats.get("q0.5") is None:
            continue
        unc = reach[k]
        start, end = t0_ns + k * frame_ns, t0_ns + (k + 1) * frame_ns
        u_lo, u_hi = max(unc, reach.get(k - 1, unc)), max(unc, reach.get(k + 1, unc))
        sure = (removed >= start + u_lo) & (late < end - u_hi)
        maybe = (late >= start - u_lo) & (removed < end + u_hi) & ~sure
        if not (sure | maybe).any():
            continue
        a, b = lat[sure], lat_late[sure]
        ma, mb = lat[maybe], lat_late[maybe]
        both_a, both_b = np.concatenate([a, ma]), np.concatenate([b, mb])
        med_lo, _ = _median_range(a, ma)
        _, med_hi = _median_range(b, mb)
        # A frame's median (or extreme) of latencies that each move by at most the uncertainty
        # moves by at most as much; each latency lies in [a, b], so its median (extreme) lies
        # between those of a and of b, over every choice of the removals near its edges.
        ranges = (
            ("q0.5", med_lo, med_hi),
            ("min", both_a.min(), b.min() if len(b) else both_b.max()),
            ("max", a.max() if len(a) else both_a.min(), both_b.max()),
        )
        over = -math.inf
        for name, lo, hi in ranges:
            if name not in stats:
                continue
            got = float(stats[name] or 0.0)
            over = max(over, max(float(lo) - got, got - float(hi), 0.0) - unc)
        checked += 1
        if over > 0:
            missed += 1
            worst = max(worst, over)
    return checked, missed, worst, negative


def judge(out: Path, channel: str, frame_ns: int, query_id: int = 0) -> tuple[int, int, float, int]:
    """A validation run's (``ground_truth``) frames of ``latency(CHANNEL)`` (query
    ``query_id``: ``p50``, ``min``, ``max``) against its device clock's exact truth, which the
    run file keeps for validation alone (``clock_truth``): every removal record's device tick
    through that clock's exact inverse, every insertion the host's own tick (see ``check``).
    Nothing the load can delay stands between the taps and this truth."""
    with ss.load(out) as run:
        truth = run.table("clock_truth")
        (spec,), (epoch,) = truth["spec"], truth["epoch_host_ns"]
        clock = EmulatedClock(EmulatedClockSpec.parse(str(spec)), int(epoch))
        probes = {(p.kind, p.target): p.id for p in run.topology.probes}
        rec = run.table("record")
        ends = {}
        for end in ("tail", "head"):
            sel = rec["probe_id"] == probes[(end, channel)]
            order = np.argsort(rec["value"][sel], kind="stable")
            ends[end] = (rec["value"][sel][order], rec["ticks"][sel][order].astype(np.int64))
        (seq_in, ins), (seq_out, ticks) = ends["tail"], ends["head"]
        _seq, i_in, i_out = np.intersect1d(seq_in, seq_out, return_indices=True)
        # When each removal really happened: exactly, but for a reading shortly after a
        # backward step, whose tick the clock showed twice: then between the two times.
        earliest = clock.true_host_ns_in_order(ticks[i_out])
        latest = np.maximum(clock.true_host_ns_latest(ticks[i_out]), earliest)
        return check(
            ins[i_in].astype(np.float64), earliest, run.meta.t0_host_ns, frame_ns,
            clock.tick_period_ns, run.results(query_id, channel), latest,
        )  # fmt: skip


class Tally:
    """Frames checked, missed, the worst excess and negative latencies, per label (``live``,
    ``refitted``/``retimed``), over many trials; ``report`` prints the lines the benchmarks end
    with and says whether every target was met."""

    def __init__(self, *labels: str) -> None:
        self.totals = {label: [0, 0, 0.0, 0] for label in labels}

    def add(self, label: str, result: tuple[int, int, float, int], what: str) -> None:
        checked, missed, worst, negative = result
        t = self.totals[label]
        t[0] += checked
        t[1] += missed
        t[2] = max(float(t[2]), worst)
        t[3] += negative
        if missed or negative:
            print(f"{what} {label}: {missed} of {checked} frames outside, by up to "
                  f"{worst / 1e3:.2f} us; {negative} negative")  # fmt: skip

    def report(self) -> bool:
        met = True
        width = max(len(label) for label in self.totals) + 1
        for label, (checked, missed, worst, negative) in self.totals.items():
            inside = 100.0 * (1 - missed / max(int(checked), 1))
            ok = missed == 0 and negative == 0
            met &= ok
            print(
                f"{label:{width}s} frames {int(checked):5d}  truth inside {inside:6.2f} %  worst "
                f"excess {float(worst) / 1e3:.2f} us  negative {int(negative)}  target 100 %, "
                f"none: {'meets' if ok else 'misses'}"
            )
        return met
