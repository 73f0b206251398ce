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

Parallel replicas of one stage (``walk0`` .. ``walk7``: see ``stage_groups``) are judged together,
on the mean of their members' states and channels, and named as one (``walk0–walk7 are
rate-limiting together``: add replicas). A replica busy enough to limit the rate while its group,
on average, is not is named alone, as the straggler that holds the others up.
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
from streamscope.analysis.groups import StageGroup, range_label, stage_groups
from streamscope.core.errors import QueryError
from streamscope.core.topology import Topology
from streamscope.store.reader import Run

SEVERITIES = ("problem", "warning", "info")
BUSY_THRESHOLD = 0.8
#: How much busier than its group's mean a replica must be to be named alone (a straggler).
STRAGGLER_MARGIN = 0.2
MOSTLY = 0.5
LITTLES_TOLERANCE = 0.2


@dataclass(frozen=True)
class Finding:
    """One conclusion about a run.

    ``kind``: ``bottleneck``, ``no_bottleneck``, ``backpressure``, ``missing_queries``,
    ``littles_law``, ``stall``, ``drops``, ``violations``, ``virtual_queue``, ``failed_run``,
    ``unfinished_run``. ``severity``: ``problem``, ``warning`` or ``info``. ``target``: the stage
    (or group of replicas, ``walk0–walk7``, its members in ``evidence["members"]``) or channel
    (or probe target) it is about, ``""`` for the whole run. ``evidence``: the numbers
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
    out.extend(_stalls(run))
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


def _busy_frames(series: Sequence[_Series], stages: Sequence[str], threshold: float) -> list[int]:
    """Frames in which the mean busy fraction of ``stages`` (those with a figure) >= threshold."""
    per: dict[int, list[float]] = {}
    for s in series:
        if s.query.metric != "state" or s.target not in stages or s.duty is None:
            continue
        if "busy" not in s.duty_labels:
            continue
        busy = s.duty[:, s.duty_labels.index("busy")]
        # One value per frame of one query: a handful, not a per-event loop.
        for f, b in zip(s.frames.tolist(), busy.tolist(), strict=True):
            if not math.isnan(b):
                per.setdefault(int(f), []).append(float(b))
    return sorted(f for f, bs in per.items() if sum(bs) / len(bs) >= threshold)


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
class _Unit:
    """A stage group with its figures: each state the mean over its members with states."""

    group: StageGroup
    role: str
    busy: float | None
    idle: float | None
    blocked_in: float | None
    blocked_out: float | None
    busy_by_member: dict[str, float]
    frames: tuple[int, ...]
    ins: list[ChannelSummary]
    outs: list[ChannelSummary]

    @property
    def name(self) -> str:
        return self.group.label


def _unit(
    group: StageGroup, by_stage: dict[str, StageBreakdown], chans: dict[str, ChannelSummary]
) -> _Unit:
    seen = [by_stage[m] for m in group.members if by_stage[m].busy is not None]

    def mean(attr: str) -> float | None:
        vals = [getattr(b, attr) for b in seen if getattr(b, attr) is not None]
        return sum(vals) / len(vals) if vals else None

    ins = [chans[c] for c in group.ins if c in chans]
    outs = [chans[c] for c in group.outs if c in chans]
    role = by_stage[group.members[0]].role
    if group.replicas or group.aliases:
        role = "source" if not ins else "sink" if not outs else "stage"
    return _Unit(
        group,
        role,
        mean("busy"),
        mean("idle"),
        mean("blocked_in"),
        mean("blocked_out"),
        {b.stage: b.busy for b in seen if b.busy is not None},
        tuple(sorted({f for b in seen for f in b.frames})),
        ins,
        outs,
    )


@dataclass(slots=True)
class _Candidate:
    unit: _Unit
    score: float
    severity: str
    in_chs: list[ChannelSummary]
    out_chs: list[ChannelSummary]
    in_full: float | None
    out_empty: float | None
    partial: bool
    #: A replica busier than its group, which is not rate-limiting on average.
    straggler_of: _Unit | None = None


def _judge(u: _Unit, busy_threshold: float, mostly: float) -> _Candidate | None:
    """``u`` as a bottleneck candidate, ``None`` when nothing says it limits the rate.

    A single stage is judged by its fullest input and its least empty output; a group by the
    mean over its channels in and out (they are one stage's inputs and outputs, many times).
    """
    one = not u.group.replicas
    i_known = [c for c in u.ins if c.full_fraction is not None]
    o_known = [c for c in u.outs if c.empty_fraction is not None]
    in_chs: list[ChannelSummary] = []
    out_chs: list[ChannelSummary] = []
    in_full = out_empty = None
    if i_known and one:
        in_chs = [max(i_known, key=lambda c: c.full_fraction or 0.0)]
        in_full = in_chs[0].full_fraction
    elif i_known:
        in_chs, in_full = i_known, _mean(c.full_fraction for c in i_known)
    if o_known and one:
        out_chs = [min(o_known, key=lambda c: c.empty_fraction or 0.0)]
        out_empty = out_chs[0].empty_fraction
    elif o_known:
        out_chs, out_empty = o_known, _mean(c.empty_fraction for c in o_known)
    out_full = max((c.full_fraction or 0.0 for c in u.outs), default=0.0)
    chan: float | None = None
    partial = False
    if in_full is not None:
        if not u.outs:
            chan = in_full
        elif out_empty is not None:
            chan = min(in_full, out_empty)
        elif out_full < mostly:
            chan, partial = in_full, True  # nothing known about its output
    busy_ok = u.busy is not None and u.busy >= busy_threshold
    chan_ok = chan is not None and chan >= mostly
    if not (busy_ok or chan_ok):
        return None
    score = (u.busy or 0.0) + (0.5 * chan if partial and chan else (chan or 0.0))
    strong = (busy_ok and (chan is None or chan_ok)) or (chan_ok and u.busy is None)
    severity = "problem" if strong and not (partial and u.busy is None) else "warning"
    return _Candidate(u, score, severity, in_chs, out_chs, in_full, out_empty, partial)


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _stragglers(
    u: _Unit,
    by_stage: dict[str, StageBreakdown],
    chans: dict[str, ChannelSummary],
    topo: Topology,
    busy_threshold: float,
    mostly: float,
) -> list[_Candidate]:
    """Members of group ``u`` busy enough to limit the rate while the group, on average, is not:
    with work dealt in turn, one slow replica holds up all of them. A member only a little
    busier than the others (less than ``STRAGGLER_MARGIN`` above the group's mean) is the
    group's own spread, not a straggler."""
    out = []
    mean = u.busy or 0.0
    for m in u.group.members:
        busy = by_stage[m].busy or 0.0
        if busy < busy_threshold or busy - mean < STRAGGLER_MARGIN:
            continue
        ins = tuple(c.name for c in topo.channels if c.dst == m) or u.group.ins
        outs = tuple(c.name for c in topo.channels if c.src == m) or u.group.outs
        one = _unit(StageGroup(m, (m,), ins=ins, outs=outs), by_stage, chans)
        one.role = u.role
        c = _judge(one, busy_threshold, mostly)
        if c is not None:
            c.straggler_of = u
            out.append(c)
    return out


def _bottleneck(
    topo: Topology,
    stages: Sequence[StageBreakdown],
    channels: Sequence[ChannelSummary],
    series: Sequence[_Series],
    busy_threshold: float,
    mostly: float,
) -> list[Finding]:
    by_stage = {b.stage: b for b in stages}
    chans = {c.channel: c for c in channels}
    groups = stage_groups(topo, (b.stage for b in stages if b.busy is not None))
    units = [_unit(g, by_stage, chans) for g in groups]
    aliases = {a for g in groups for a in g.aliases}
    unobserved = [b.stage for b in stages if b.busy is None and b.stage not in aliases]
    any_state = any(b.busy is not None for b in stages)
    any_fill = any(c.full_fraction is not None or c.empty_fraction is not None for c in channels)
    out: list[Finding] = []
    if not any_state:
        names = ", ".join(u.group.pattern for u in units if u.ins) or "..."
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
    for u in units:
        if not u.ins:
            continue  # a source: see _no_bottleneck
        cand = _judge(u, busy_threshold, mostly)
        if cand is not None:
            cands.append(cand)
        elif u.group.replicas:
            cands.extend(_stragglers(u, by_stage, chans, topo, busy_threshold, mostly))

    if cands:
        best = max(cands, key=lambda c: c.score)
        others = [c.unit.name for c in cands if c is not best]
        out.append(_bottleneck_finding(best, others, unobserved, series, busy_threshold, mostly))
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
    out.append(_no_bottleneck(units, channels, unobserved, busy_threshold))
    return out


def _channel_frames(
    chs: list[ChannelSummary], which: str, series: Sequence[_Series], mostly: float
) -> list[list[int]]:
    """Frames in which any of ``chs`` was mostly full (``which='full'``) or mostly empty."""
    frames: set[int] = set()
    for ch in chs:
        frames.update(_level_frames(series, ch.channel, ch.capacity, which, mostly))
    return frame_ranges(frames)


def _channels_part(chs: list[ChannelSummary], way: str, whom: str, frac: float | None) -> str:
    """``the channel into work (src -> work) is full 90 %``; several: their mean, unnamed."""
    state = "full" if way == "into" else "empty"
    verb = "is " if way == "into" else ""
    if len(chs) == 1:
        return f"the channel {way} {whom} ({chs[0].channel}) {verb}{state} {pct(frac)}"
    verb = "are " if way == "into" else ""
    return f"the {len(chs)} channels {way} {whom} {verb}{state} {pct(frac)} on average"


def _bottleneck_finding(
    c: _Candidate,
    others: list[str],
    unobserved: list[str],
    series: Sequence[_Series],
    busy_threshold: float,
    mostly: float,
) -> Finding:
    u = c.unit
    g = u.group
    name = u.name
    many = g.replicas
    sink = u.role == "sink"
    parts: list[str] = []
    evidence: dict[str, Any] = {"stage": name, "role": u.role, "score": _r(c.score)}
    if many:
        evidence |= {"members": list(g.members), "replicas": len(g.members)}
    if g.aliases:
        evidence["aliases"] = list(g.aliases)
    if c.in_chs:
        parts.append(_channels_part(c.in_chs, "into", "them" if many else name, c.in_full))
        evidence |= {
            "input_channel": c.in_chs[0].channel,
            "input_full_fraction": _r(c.in_full),
            "input_full_frames": _channel_frames(c.in_chs, "full", series, mostly),
        }
        if many:
            evidence["input_channels"] = {ch.channel: _r(ch.full_fraction) for ch in c.in_chs}
    if c.out_chs:
        parts.append(_channels_part(c.out_chs, "out of", "them" if many else "it", c.out_empty))
        evidence |= {
            "output_channel": c.out_chs[0].channel,
            "output_empty_fraction": _r(c.out_empty),
            "output_empty_frames": _channel_frames(c.out_chs, "empty", series, mostly),
        }
        if many:
            evidence["output_channels"] = {ch.channel: _r(ch.empty_fraction) for ch in c.out_chs}
    thr = [ch.throughput_per_s for ch in u.ins if ch.throughput_per_s is not None]
    if many and thr and len(thr) == len(u.ins):
        evidence["throughput_per_s"] = _r(sum(thr))  # all that the replicas take in, together
    if u.busy is not None:
        if many:
            lo, hi = min(u.busy_by_member.values()), max(u.busy_by_member.values())
            each = f"{pct(lo)} to {pct(hi)} each" if len(u.busy_by_member) > 1 else "one measured"
            parts.insert(0, f"they are busy {pct(u.busy)} of the time on average ({each})")
            evidence["busy_by_member"] = {m: _r(b) for m, b in u.busy_by_member.items()}
        else:
            parts.append(f"{name} is busy {pct(u.busy)}")
        evidence |= {
            "busy": _r(u.busy),
            "idle": _r(u.idle),
            "blocked_in": _r(u.blocked_in),
            "blocked_out": _r(u.blocked_out),
            "busy_frames": frame_ranges(_busy_frames(series, g.members, busy_threshold)),
            "state_frames": frame_ranges(u.frames),
        }
    sentence = "; ".join(parts)
    if many:
        near = [f"fed by {', '.join(dict.fromkeys(ch.src for ch in u.ins))}"] if u.ins else []
        near += [f"feeding {', '.join(dict.fromkeys(ch.dst for ch in u.outs))}"] if u.outs else []
        where = f" ({', '.join(near)})" if near else ""
        detail = (
            f"{name} are {len(g.members)} parallel replicas of one stage{where}, judged "
            f"together. Over the whole run, {sentence}."
        )
        if sink:
            detail += " As the sinks, they set the rate of everything before them."
        else:
            detail += " Stages before them wait for them, stages after them starve."
    else:
        if sentence.startswith("the "):  # a stage's name keeps its case
            sentence = "T" + sentence[1:]
        detail = sentence + " of the time, over the whole run."
        if sink:
            detail += f" As the sink, {name} sets the rate of everything before it."
        else:
            detail += f" Stages before {name} wait for it, stages after it starve."
    missing = []
    if u.busy is None:
        missing.append(f"state({g.pattern}) was not queried")
    elif many and len(u.busy_by_member) < len(g.members):
        quiet = [m for m in g.members if m not in u.busy_by_member]
        missing.append(f"state({range_label(quiet)}) was not queried")
    if c.partial:
        missing.append(f"the occupancy of the channels out of {name} was not measured")
    if missing:
        detail += " Not confirmed: " + " and ".join(missing) + "."
        evidence["missing"] = missing
    title = f"stage {name} is rate-limiting"
    buffer_note = "a larger buffer will not help"
    suggestion = f"give {name} more parallelism or make it faster; {buffer_note}"
    if many:
        title = f"{name} are rate-limiting together"
        if u.busy is not None:
            title += f" (busy {pct(u.busy)} on average)"
        suggestion = (
            f"add replicas (more {g.stem.rstrip('-_. ')} stages) or make each faster; "
            + buffer_note
        )
    elif c.straggler_of is not None:
        grp = c.straggler_of
        detail += (
            f" {name} is one of {len(grp.group.members)} replicas ({grp.name}), which are busy "
            f"only {pct(grp.busy)} on average: it is slower than the others or gets more of "
            "the work, and where work is dealt in turn the others wait for it."
        )
        evidence |= {"replicas_of": grp.name, "replicas_busy": _r(grp.busy)}
        suggestion = (
            f"find why {name} is slower than the other replicas in {grp.name} (its resource, "
            "its share of the work), or deal work to whichever replica is free; "
            "more replicas will not help while one lags"
        )
    if others:
        detail += f" Also near saturation: {', '.join(others)}."
        evidence["other_candidates"] = others
    if unobserved:
        evidence["stages_without_state"] = unobserved
    producers = list(dict.fromkeys(ch.src for ch in u.ins))
    if producers:
        evidence["producers"] = producers
    return Finding("bottleneck", c.severity, name, title, detail, evidence, suggestion)


def _no_bottleneck(
    units: Sequence[_Unit],
    channels: Sequence[ChannelSummary],
    unobserved: list[str],
    busy_threshold: float,
) -> Finding:
    observed = [u for u in units if u.busy is not None]
    busiest = max(
        (u for u in observed if u.role != "source"),
        key=lambda u: u.busy or 0.0,
        default=None,
    )
    busy_sources = [u for u in observed if u.role == "source" and (u.busy or 0.0) >= busy_threshold]
    fullest = max(
        (c for c in channels if c.full_fraction is not None),
        key=lambda c: c.full_fraction or 0.0,
        default=None,
    )
    parts = [f"No stage after the sources is busy {pct(busy_threshold)} or more"]
    if busiest is not None:
        avg = " on average" if busiest.group.replicas else ""
        parts[0] += f" (the busiest, {busiest.name}, {pct(busiest.busy)}{avg})"
    if fullest is not None:
        parts.append(
            f"no channel is mostly full (the fullest, {fullest.channel}, {pct(fullest.full_fraction)})"
        )
    detail = " and ".join(parts) + "."
    suggestion = "nothing to fix in the pipeline: it keeps up with its input"
    if busy_sources:
        src = busy_sources[0]
        if src.group.replicas:
            detail += (
                f" The sources {src.name} are busy {pct(src.busy)} on average producing or "
                "waiting for their input: the pipeline keeps up with them."
            )
        else:
            detail += (
                f" The source {src.name} is busy {pct(src.busy)} producing or waiting for its "
                "input: the pipeline keeps up with it."
            )
        suggestion = f"to go faster, feed {src.name} faster; the stages after it have headroom"
    if unobserved:
        detail += f" Not observed: {', '.join(unobserved)}."
    evidence: dict[str, Any] = {
        "busy": {m: _r(b) for u in observed for m, b in u.busy_by_member.items()},
        "full_fraction": {
            c.channel: _r(c.full_fraction) for c in channels if c.full_fraction is not None
        },
        "state_frames": frame_ranges(f for u in observed for f in u.frames),
    }
    groups = {u.name: list(u.group.members) for u in units if u.group.replicas}
    if groups:
        evidence["groups"] = groups
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


def _stalls(run: Run) -> list[Finding]:
    """Stages busy past the run's stall limit without finishing anything, longest per stage."""
    table = run.table("stall")
    longest: dict[str, tuple[int, int, bool]] = {}
    for stage, start, end, ongoing in zip(
        table["stage"].tolist(), table["start_ns"].tolist(), table["end_ns"].tolist(),
        table["ongoing"].tolist(), strict=True,
    ):  # fmt: skip
        best = longest.get(stage)
        if best is None or end - start > best[1] - best[0]:
            longest[stage] = (int(start), int(end), bool(ongoing))
    out = []
    for stage, (start, end, ongoing) in sorted(longest.items()):
        secs = (end - start) / 1e9
        until = "to the end of the run" if ongoing else f"until {end / 1e9:.1f} s"
        out.append(
            Finding(
                "stall",
                "problem",
                stage,
                f"{stage} made no progress for {secs:.1f} s"
                + (" and was still stuck at the end" if ongoing else ""),
                f"{stage} was busy from {start / 1e9:.1f} s {until} without finishing anything "
                "(no state change): its code hung there, or one item takes that long. Frames in "
                "that span show it 100 % busy, but it did no work the pipeline could see.",
                {
                    "start_ns": start,
                    "end_ns": end,
                    "seconds": _r(secs),
                    "ongoing": ongoing,
                    "stalls": sum(1 for s in table["stage"].tolist() if s == stage),
                },
                f"look at what {stage} does with one item (a lock, a blocking call without a "
                "timeout, an endless loop); `streamscope run --trace-stage` shows its calls",
            )
        )
    return out


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
