"""Automatic reading of a recorded run: the bottleneck, Little's law, and what went wrong.

In: a ``Run``. Out: ``findings(run)``, a list of ``Finding`` (most severe first), each with a
one-line title, a few sentences with the numbers, the numbers themselves and the frames they come
from (``evidence``), and what to do about it. Only what the run recorded is used; where a query
that would settle a question is missing, a finding says which to add instead of guessing.

The bottleneck rule (seed 003's reading of stage states and channel fill): a stage limits the
pipeline's rate when it is busy most of the time (``busy >= busy_threshold``) and/or the channel
into it is mostly full while the channel out of it is mostly empty (a sink: its input is mostly
full). The stage with the strongest evidence is named. A source is never named for being busy:
its busy time includes waiting for its own input (a paced or external source); when only the
source is busy, the pipeline keeps up with it and there is no bottleneck downstream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamscope.analysis.breakdown import (
    ChannelSummary,
    StageBreakdown,
    _channel_summary,
    _Series,
    _stage_breakdown,
    collect,
    full_empty_per_frame,
    whole_run,
)
from streamscope.core.errors import QueryError
from streamscope.core.topology import Topology
from streamscope.store.reader import Run

SEVERITIES = ("problem", "warning", "info")
BUSY_THRESHOLD = 0.8
MOSTLY = 0.5
LITTLES_TOLERANCE = 0.2


@dataclass(frozen=True)
class Finding:
    """One conclusion about a run.

    ``kind``: ``bottleneck``, ``no_bottleneck``, ``backpressure``, ``missing_queries``,
    ``littles_law``, ``drops``, ``violations``, ``virtual_queue``, ``failed_run``,
    ``unfinished_run``. ``severity``: ``problem``, ``warning`` or ``info``. ``target``: the stage
    or channel (or probe target) it is about, ``""`` for the whole run. ``evidence``: the numbers
    (fractions in 0..1, times in ns) and the frames they come from, as ``[first, last]`` ranges.
    """

    kind: str
    severity: str
    target: str
    title: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict, hash=False)
    suggestion: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A ``json.dumps``-able dict (``NaN`` becomes ``None``)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "target": self.target,
            "title": self.title,
            "detail": self.detail,
            "evidence": _plain(self.evidence),
            "suggestion": self.suggestion,
        }


def findings(
    run: Run,
    *,
    busy_threshold: float = BUSY_THRESHOLD,
    mostly: float = MOSTLY,
    littles_tolerance: float = LITTLES_TOLERANCE,
) -> list[Finding]:
    """Everything ``run`` shows, most severe first (problem, warning, info; stable otherwise).

    ``busy_threshold``: the busy fraction that makes a stage rate-limiting; ``mostly``: the
    fraction of time that makes a channel "mostly" full or empty; ``littles_tolerance``: how far
    L / (λ·W) may stray from 1 before the Little's law check warns.
    """
    series = collect(run)
    stages = _stage_breakdown(run, series)
    channels = _channel_summary(run, series)
    out: list[Finding] = []
    out.extend(_run_status(run))
    out.extend(_bottleneck(run.topology, stages, channels, series, busy_threshold, mostly))
    out.extend(_littles_law(run, series, littles_tolerance))
    out.extend(_drops(run))
    out.extend(_violations(series))
    out.extend(_virtual_queues(run))
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: rank.get(f.severity, len(rank)))


# --- helpers --------------------------------------------------------------------------------


def pct(x: float | None) -> str:
    """``0.934`` → ``'93 %'``; ``None`` → ``'-'``."""
    return "-" if x is None or math.isnan(x) else f"{x * 100:.0f} %"


def frame_ranges(frames: Iterable[int]) -> list[list[int]]:
    """Frame numbers as ``[first, last]`` runs: ``{0, 1, 2, 5}`` → ``[[0, 2], [5, 5]]``."""
    out: list[list[int]] = []
    for f in sorted(set(frames)):
        if out and f == out[-1][1] + 1:
            out[-1][1] = f
        else:
            out.append([f, f])
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits)


def _busy_frames(series: Sequence[_Series], stage: str, threshold: float) -> list[int]:
    out: set[int] = set()
    for s in series:
        if s.query.metric == "state" and s.target == stage and s.duty is not None:
            if "busy" not in s.duty_labels:
                continue
            busy = s.duty[:, s.duty_labels.index("busy")]
            out.update(int(f) for f in s.frames[np.nan_to_num(busy) >= threshold])
    return sorted(out)


def _level_frames(
    series: Sequence[_Series], channel: str, capacity: int, which: str, mostly: float
) -> list[int]:
    """Frames in which ``channel`` was full (``which='full'``) or empty at least ``mostly``."""
    out: set[int] = set()
    for s in series:
        if s.query.metric != "occupancy" or s.target != channel:
            continue
        total, empty, full = full_empty_per_frame(s, capacity)
        part = full if which == "full" else empty
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = part / total
        out.update(int(f) for f in s.frames[np.nan_to_num(frac) >= mostly])
    return sorted(out)


# --- run status -----------------------------------------------------------------------------


def _run_status(run: Run) -> list[Finding]:
    if run.status in ("failed", "interrupted"):
        return [
            Finding(
                "failed_run",
                "problem",
                "",
                f"the run {run.status}",
                f"The run ended {run.status}"
                + (f": {run.error}." if run.error else " without an error message.")
                + " Its frames stop where it stopped, so every figure covers only that part.",
                {"status": run.status, "error": run.error, "duration_ns": run.duration_ns},
                "fix the failure and run again before reading the performance figures"
                if run.status == "failed"
                else "run it to the end before comparing its figures",
            )
        ]
    if run.status == "running":
        return [
            Finding(
                "unfinished_run",
                "warning",
                "",
                "the run never finished (its monitor died, or it is still going)",
                "The run file says the run is still running, so it has no duration and its last "
                "frames may be missing. The frames it wrote are complete.",
                {"status": run.status},
                "run it again to the end",
            )
        ]
    return []


# --- bottleneck -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Candidate:
    stage: StageBreakdown
    score: float
    severity: str
    in_ch: ChannelSummary | None
    out_ch: ChannelSummary | None
    in_full: float | None
    out_empty: float | None
    partial: bool


def _bottleneck(
    topo: Topology,
    stages: Sequence[StageBreakdown],
    channels: Sequence[ChannelSummary],
    series: Sequence[_Series],
    busy_threshold: float,
    mostly: float,
) -> list[Finding]:
    by_stage = {b.stage: b for b in stages}
    ins: dict[str, list[ChannelSummary]] = {s.name: [] for s in topo.stages}
    outs: dict[str, list[ChannelSummary]] = {s.name: [] for s in topo.stages}
    for c in channels:
        ins.setdefault(c.dst, []).append(c)
        outs.setdefault(c.src, []).append(c)
    unobserved = [b.stage for b in stages if b.busy is None]
    any_state = len(unobserved) < len(stages)
    any_fill = any(c.full_fraction is not None or c.empty_fraction is not None for c in channels)
    out: list[Finding] = []
    if not any_state:
        names = ", ".join(s.name for s in topo.stages if ins.get(s.name)) or "..."
        out.append(
            Finding(
                "missing_queries",
                "info",
                "",
                "add state(...) queries to locate the bottleneck",
                "No stage's states (idle, busy, blocked) were recorded, so which stage limits the "
                "rate can only be read from how the channels fill"
                + (", and no occupancy histogram was recorded either." if not any_fill else "."),
                {"stages_without_state": unobserved},
                f"query state(STAGE): duty for the stages ({names}) and "
                "occupancy(A -> B): mean, max, histogram for the channels between them",
            )
        )
        if not any_fill:
            return out

    cands: list[_Candidate] = []
    for st in topo.stages:
        b = by_stage[st.name]
        i_known = [c for c in ins.get(st.name, []) if c.full_fraction is not None]
        if not ins.get(st.name):
            continue  # a source: see _source_bound
        in_ch = max(i_known, key=lambda c: c.full_fraction or 0.0) if i_known else None
        in_full = in_ch.full_fraction if in_ch else None
        o_all = outs.get(st.name, [])
        o_empty = [c for c in o_all if c.empty_fraction is not None]
        out_ch = min(o_empty, key=lambda c: c.empty_fraction or 0.0) if o_empty else None
        out_empty = out_ch.empty_fraction if out_ch else None
        out_full = max((c.full_fraction or 0.0 for c in o_all), default=0.0)
        chan: float | None = None
        partial = False
        if in_full is not None:
            if not o_all:
                chan = in_full
            elif out_empty is not None:
                chan = min(in_full, out_empty)
            elif out_full < mostly:
                chan, partial = in_full, True  # nothing known about its output
        busy_ok = b.busy is not None and b.busy >= busy_threshold
        chan_ok = chan is not None and chan >= mostly
        if not (busy_ok or chan_ok):
            continue
        score = (b.busy or 0.0) + (0.5 * chan if partial and chan else (chan or 0.0))
        strong = (busy_ok and (chan is None or chan_ok)) or (chan_ok and b.busy is None)
        severity = "problem" if strong and not (partial and b.busy is None) else "warning"
        cands.append(_Candidate(b, score, severity, in_ch, out_ch, in_full, out_empty, partial))

    if cands:
        best = max(cands, key=lambda c: c.score)
        others = [c.stage.stage for c in cands if c is not best]
        out.append(
            _bottleneck_finding(best, others, unobserved, ins, series, busy_threshold, mostly)
        )
        return out

    full_channels = [
        c for c in channels if c.full_fraction is not None and c.full_fraction >= mostly
    ]
    if full_channels:
        c = max(full_channels, key=lambda c: c.full_fraction or 0.0)
        out.append(
            Finding(
                "backpressure",
                "warning",
                c.channel,
                f"channel {c.channel} is mostly full, but no stage explains it",
                f"{c.channel} is full {pct(c.full_fraction)} of the time, so {c.src} waits to put, "
                f"yet what was recorded does not show {c.dst} or a stage after it as "
                "rate-limiting.",
                {
                    "channel": c.channel,
                    "full_fraction": _r(c.full_fraction),
                    "frames": frame_ranges(
                        _level_frames(series, c.channel, c.capacity, "full", mostly)
                    ),
                    "stages_without_state": unobserved,
                },
                f"query state(...) of {c.dst} and the stages after it, and the occupancy of "
                "their channels, to find where the pipeline is held up",
            )
        )
        return out
    if not any_state:
        return out
    out.append(_no_bottleneck(topo, stages, channels, outs, unobserved, busy_threshold))
    return out


def _bottleneck_finding(
    c: _Candidate,
    others: list[str],
    unobserved: list[str],
    ins: dict[str, list[ChannelSummary]],
    series: Sequence[_Series],
    busy_threshold: float,
    mostly: float,
) -> Finding:
    b = c.stage
    name = b.stage
    sink = b.role == "sink"
    parts: list[str] = []
    evidence: dict[str, Any] = {"stage": name, "role": b.role, "score": _r(c.score)}
    if c.in_ch is not None:
        parts.append(f"the channel into {name} ({c.in_ch.channel}) is full {pct(c.in_full)}")
        evidence |= {
            "input_channel": c.in_ch.channel,
            "input_full_fraction": _r(c.in_full),
            "input_full_frames": frame_ranges(
                _level_frames(series, c.in_ch.channel, c.in_ch.capacity, "full", mostly)
            ),
        }
    if c.out_ch is not None:
        parts.append(f"the channel out of it ({c.out_ch.channel}) empty {pct(c.out_empty)}")
        evidence |= {
            "output_channel": c.out_ch.channel,
            "output_empty_fraction": _r(c.out_empty),
            "output_empty_frames": frame_ranges(
                _level_frames(series, c.out_ch.channel, c.out_ch.capacity, "empty", mostly)
            ),
        }
    if b.busy is not None:
        parts.append(f"{name} is busy {pct(b.busy)}")
        evidence |= {
            "busy": _r(b.busy),
            "idle": _r(b.idle),
            "blocked_in": _r(b.blocked_in),
            "blocked_out": _r(b.blocked_out),
            "busy_frames": frame_ranges(_busy_frames(series, name, busy_threshold)),
            "state_frames": frame_ranges(b.frames),
        }
    sentence = "; ".join(parts)
    detail = sentence[0].upper() + sentence[1:] + " of the time, over the whole run."
    if sink:
        detail += f" As the sink, {name} sets the rate of everything before it."
    else:
        detail += f" Stages before {name} wait for it, stages after it starve."
    missing = []
    if b.busy is None:
        missing.append(f"state({name}) was not queried")
    if c.partial:
        missing.append(f"the occupancy of the channels out of {name} was not measured")
    if missing:
        detail += " Not confirmed: " + " and ".join(missing) + "."
        evidence["missing"] = missing
    if others:
        detail += f" Also near saturation: {', '.join(others)}."
        evidence["other_candidates"] = others
    if unobserved:
        evidence["stages_without_state"] = unobserved
    buffer_note = "a larger buffer will not help"
    producers = [ch.src for ch in ins.get(name, [])]
    if producers:
        evidence["producers"] = producers
    return Finding(
        "bottleneck",
        c.severity,
        name,
        f"stage {name} is rate-limiting",
        detail,
        evidence,
        f"give {name} more parallelism or make it faster; {buffer_note}",
    )


def _no_bottleneck(
    topo: Topology,
    stages: Sequence[StageBreakdown],
    channels: Sequence[ChannelSummary],
    outs: dict[str, list[ChannelSummary]],
    unobserved: list[str],
    busy_threshold: float,
) -> Finding:
    observed = [b for b in stages if b.busy is not None]
    busiest = max(
        (b for b in observed if b.role != "source"),
        key=lambda b: b.busy or 0.0,
        default=None,
    )
    busy_sources = [b for b in observed if b.role == "source" and (b.busy or 0.0) >= busy_threshold]
    fullest = max(
        (c for c in channels if c.full_fraction is not None),
        key=lambda c: c.full_fraction or 0.0,
        default=None,
    )
    parts = [f"No stage after the sources is busy {pct(busy_threshold)} or more"]
    if busiest is not None:
        parts[0] += f" (the busiest, {busiest.stage}, {pct(busiest.busy)})"
    if fullest is not None:
        parts.append(
            f"no channel is mostly full (the fullest, {fullest.channel}, {pct(fullest.full_fraction)})"
        )
    detail = " and ".join(parts) + "."
    suggestion = "nothing to fix in the pipeline: it keeps up with its input"
    if busy_sources:
        src = busy_sources[0]
        detail += (
            f" The source {src.stage} is busy {pct(src.busy)} producing or waiting for its "
            "input: the pipeline keeps up with it."
        )
        suggestion = f"to go faster, feed {src.stage} faster; the stages after it have headroom"
    if unobserved:
        detail += f" Not observed: {', '.join(unobserved)}."
    evidence: dict[str, Any] = {
        "busy": {b.stage: _r(b.busy) for b in observed},
        "full_fraction": {
            c.channel: _r(c.full_fraction) for c in channels if c.full_fraction is not None
        },
        "state_frames": frame_ranges(f for b in observed for f in b.frames),
    }
    if unobserved:
        evidence["stages_without_state"] = unobserved
    return Finding(
        "no_bottleneck",
        "info",
        "",
        "no bottleneck: no stage is saturated and no channel is mostly full",
        detail,
        evidence,
        suggestion,
    )


# --- Little's law ---------------------------------------------------------------------------


def _littles_law(run: Run, series: Sequence[_Series], tolerance: float) -> list[Finding]:
    out = []
    for ch in run.topology.channels:
        got = {}
        for metric in ("occupancy", "throughput", "latency"):
            s = next(
                (
                    s
                    for s in series
                    if s.target == ch.name and s.query.metric == metric and "mean" in s.scalars
                ),
                None,
            )
            if s is not None:
                got[metric] = s
        if len(got) < 3:
            continue
        occ, thr, lat = got["occupancy"], got["throughput"], got["latency"]
        same_grid = occ.query.frame_ns == thr.query.frame_ns == lat.query.frame_ns
        if same_grid:
            common = np.intersect1d(np.intersect1d(occ.frames, thr.frames), lat.frames)

            def pick(s: _Series, stat: str, common: Any = common) -> Any:
                idx = np.searchsorted(s.frames, common)
                return s.scalars[stat][idx], s.covered[idx]

            l_v, cov = pick(occ, "mean")
            t_v, _ = pick(thr, "mean")
            w_v, _ = pick(lat, "mean")
            ok = ~(np.isnan(l_v) | np.isnan(t_v)) & (cov > 0)
            frames = common[ok]
            if not ok.any():
                continue
            c = cov[ok]
            big_l = float(np.dot(l_v[ok], c) / c.sum())
            lam = float(np.dot(t_v[ok], c) / c.sum())
            n = t_v[ok] * c
            wok = ~np.isnan(w_v[ok]) & (n > 0)
            if not wok.any():
                continue
            big_w = float(np.dot(w_v[ok][wok], n[wok]) / n[wok].sum())
        else:
            lv = whole_run(occ.scalars["mean"], occ.covered, "mean")
            tv = whole_run(thr.scalars["mean"], thr.covered, "mean")
            wv = whole_run(lat.scalars["mean"], lat.covered, "mean")
            if lv is None or tv is None or wv is None:
                continue
            big_l, lam, big_w = lv, tv, wv
            frames = np.union1d(occ.frames, thr.frames)
        product = lam * big_w / 1e9
        if product <= 0 and big_l <= 0:
            continue
        ratio = big_l / product if product > 0 else math.inf
        ok_law = abs(ratio - 1.0) <= tolerance
        kind_of_l = "the model's estimate of " if ch.is_link else ""
        evidence = {
            "channel": ch.name,
            "L_items": _r(big_l),
            "lambda_per_s": _r(lam),
            "W_ns": _r(big_w, 1),
            "lambda_W_items": _r(product),
            "ratio": _r(ratio),
            "tolerance": tolerance,
            "same_frames": same_grid,
            "frames": frame_ranges(int(f) for f in frames),
        }
        detail = (
            f"Over the whole run, {kind_of_l}the mean occupancy L = {big_l:.3g} items and "
            f"throughput × mean latency λ·W = {lam:.4g}/s × {big_w / 1e6:.4g} ms = "
            f"{product:.3g} items (L / λW = {ratio:.3g}, tolerance ±{tolerance * 100:.0f} %)."
        )
        if ok_law:
            out.append(
                Finding(
                    "littles_law",
                    "info",
                    ch.name,
                    f"Little's law holds on {ch.name} (L / λW = {ratio:.2f})",
                    detail + " The three measurements of this channel agree.",
                    evidence,
                    "",
                )
            )
        else:
            out.append(
                Finding(
                    "littles_law",
                    "warning",
                    ch.name,
                    f"Little's law does not hold on {ch.name} (L / λW = {ratio:.2f})",
                    detail + " The measurements of this channel disagree, so at least one is off.",
                    evidence,
                    "look for dropped probe records, partly covered frames, clock-domain trouble "
                    + ("or a rejected queue model " if ch.is_link else "")
                    + "on this channel; a run long against its frame narrows edge effects",
                )
            )
    return out


# --- drops, violations, virtual queues ------------------------------------------------------


def _drops(run: Run) -> list[Finding]:
    per: dict[int, list[int]] = {}
    frames: dict[int, list[int]] = {}
    for d in run.drops():
        acc = per.setdefault(d.probe_id, [0, 0])
        acc[0] += d.dropped
        acc[1] += d.recorded
        if d.dropped:
            frames.setdefault(d.probe_id, []).append(d.frame)
    out = []
    for pid, (dropped, recorded) in per.items():
        if not dropped:
            continue
        try:
            probe = run.topology.probe(pid)
            kind, target = probe.kind, probe.target
        except KeyError:
            kind, target = "?", f"probe {pid}"
        frac = dropped / max(dropped + recorded, 1)
        out.append(
            Finding(
                "drops",
                "warning",
                target,
                f"the {kind} probe on {target} lost {dropped:,} records ({pct(frac)})",
                f"Its buffer was full {len(frames.get(pid, []))} times between flushes, so "
                f"{dropped:,} of {dropped + recorded:,} records were refused. Results from it in "
                "those frames are incomplete (counts and rates too low, distributions skewed).",
                {
                    "probe_id": pid,
                    "kind": kind,
                    "target": target,
                    "dropped": dropped,
                    "recorded": recorded,
                    "fraction": _r(frac),
                    "frames": frame_ranges(frames.get(pid, [])),
                },
                "give the probes larger buffers (RunOptions.tap_capacity) or flush them more "
                "often (RunOptions.flush_interval_s)",
            )
        )
    return out


def _violations(series: Sequence[_Series]) -> list[Finding]:
    out = []
    for s in series:
        v = s.scalars.get("violations")
        if v is None:
            continue
        bad = np.nan_to_num(v) > 0
        if not bad.any():
            continue
        total = int(np.nansum(v))
        out.append(
            Finding(
                "violations",
                "warning",
                s.target,
                f"{total:,} causality violations on {s.target}",
                f"On {s.target}, {total:,} events were timed before their cause (an item leaving "
                "before it arrived, or a negative occupancy) once mapped to virtual time. The "
                "clock mapping between the two domains is off by more than the events' spacing.",
                {
                    "query": s.query.text,
                    "violations": total,
                    "frames": frame_ranges(int(f) for f in s.frames[bad]),
                },
                "calibrate the clock domains more often (--calibrate-every) or use the robust "
                "hull fit; check `streamscope show` for clock steps",
            )
        )
    return out


def _virtual_queues(run: Run) -> list[Finding]:
    try:
        vqs = run.virtual_queues()
    except QueryError:  # a file without virtual-queue tables: nothing to say
        return []
    out = []
    for v in vqs:
        if v.get("verdict") != "rejected":
            continue
        target = str(v["target"])
        rejected = [
            int(f["frame"]) for f in v.get("frames_detail", []) if f.get("verdict") == "rejected"
        ]
        out.append(
            Finding(
                "virtual_queue",
                "warning",
                target,
                f"the {v.get('model')} model of link channel {target} is rejected",
                f"The model's prediction of the tail and head buffers disagrees with their "
                f"measurements in {v.get('frames_rejected')} of {v.get('frames')} frames "
                f"(p = {float(v.get('p_value') or 0.0):.3g}), more than chance explains, so the "
                f"estimated occupancy of {target} is not reliable.",
                {
                    "query_id": v.get("query_id"),
                    "model": v.get("model"),
                    "frames_checked": v.get("frames"),
                    "frames_rejected": v.get("frames_rejected"),
                    "p_value": v.get("p_value"),
                    "w1_items": v.get("w1_items"),
                    "frames": frame_ranges(rejected),
                },
                "check the link's description (bulk size, transfer time, timeout) against the "
                "device, and its clock calibration",
            )
        )
    return out
