"""The bottleneck pass: which stage, or group of replicas, limits the pipeline's rate, if any.

In: a ``Context``. Out: at most one of ``bottleneck`` (the stage named), ``backpressure`` (a full
channel no stage explains) or ``no_bottleneck``, after a ``missing_queries`` finding where no
stage's states were recorded.

The rule (the reading of stage states and channel fill of Curreri, Koehler, George, Holland &
Garcia, Performance Analysis Framework for High-Level Language Applications in Reconfigurable
Computing, 2010): a stage limits the pipeline's
rate when it is busy most of the time (``busy >= busy_threshold``) and/or the channel into it is
mostly full while the channel out of it is mostly empty (a sink: its input is mostly full). The
stage with the strongest evidence is named. A source is never named for being busy: its busy
time includes waiting for its own input (a paced or external source); when only the source is
busy, the pipeline keeps up with it and there is no bottleneck downstream.

Parallel replicas of one stage (``walk0`` .. ``walk7``: see ``stage_groups``) are judged together,
on the mean of their members' states and channels, and named as one (``walk0–walk7 are
rate-limiting together``: add replicas). A replica busy enough to limit the rate while its group,
on average, is not is named alone, as the straggler that holds the others up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from streamscope.analysis.bottleneck_finding import bottleneck_finding
from streamscope.analysis.breakdown import ChannelSummary, StageBreakdown
from streamscope.analysis.candidates import Candidate, Unit, judge, stragglers, unit
from streamscope.analysis.context import Context, Finding
from streamscope.analysis.evidence import frame_ranges, level_frames, rounded
from streamscope.analysis.groups import stage_groups
from streamscope.core.fmt import pct


def bottleneck(ctx: Context) -> list[Finding]:
    """The pass: see the module docstring for the rule."""
    if not ctx.run.topology.stages:
        return []  # nothing was seen (the run says so): no stage to name, no query to add
    units, unobserved = _units(ctx)
    any_state = any(b.busy is not None for b in ctx.stages)
    out: list[Finding] = []
    if not any_state:
        out.append(_missing_states(ctx, units, unobserved))
        if not _any_fill(ctx.channels):
            return out
    cands = _candidates(ctx, units)
    if cands:
        best = max(cands, key=lambda c: c.score)
        others = [c.unit.name for c in cands if c is not best]
        out.append(bottleneck_finding(best, others, unobserved, ctx))
    elif (lock := _interpreter_lock(ctx, units)) is not None:
        out.append(lock)
    elif (pressure := _backpressure(ctx, unobserved)) is not None:
        out.append(pressure)
    elif any_state:
        out.append(_no_bottleneck(ctx, units, unobserved))
    return out


def _any_fill(channels: Sequence[ChannelSummary]) -> bool:
    """Whether any channel's fill (full or empty fraction) was measured."""
    return any(c.full_fraction is not None or c.empty_fraction is not None for c in channels)


def _by_name(ctx: Context) -> tuple[dict[str, StageBreakdown], dict[str, ChannelSummary]]:
    by_stage = {b.stage: b for b in ctx.stages}
    return by_stage, {c.channel: _handed_over(c, by_stage, ctx) for c in ctx.channels}


def _handed_over(
    c: ChannelSummary, by_stage: dict[str, StageBreakdown], ctx: Context
) -> ChannelSummary:
    """A channel whose fill says nothing of its being full (no capacity: a queue without a
    bound, or a hand-over, streamz's node calling the next, which takes the item at once or
    keeps its producer waiting) is judged by the stages at its ends, where each has it alone
    on that side: full while its producer waited to put (blocked out), where that is most of
    the producer's time and the consumer was busy most of its own (the producer waited on
    it, not on something beyond: nor on a busier stage it hands its items to), empty while
    its consumer waited to take (blocked in). A hand-over holds its item for no time, so its
    fill reads empty throughout, whoever waits. (A synchronous
    stream's stage, its items brought by its loop's thread, waited 13-17 % of its time
    between items beside two CPU hogs, 0.83 busy: the main thread emitting into it, blocked
    out 99.7 % of the time, says it limits the rate.)"""
    if c.full_fraction is not None:
        return c
    src = by_stage.get(c.srcs[0]) if len(c.srcs) == 1 else None
    dst = by_stage.get(c.dsts[0]) if len(c.dsts) == 1 else None
    if src is None or src.blocked_out is None or src.blocked_out < ctx.mostly:
        return c
    if dst is None or dst.busy is None or dst.busy < ctx.mostly:
        return c  # what its producer waited on lies further on (a stream's tasks all at work)
    if _busier_beyond(dst, by_stage, ctx):
        return c
    if sum(1 for o in ctx.channels if c.srcs[0] in o.srcs) != 1:
        return c
    empty = c.empty_fraction
    alone = dst is not None and sum(1 for o in ctx.channels if c.dsts[0] in o.dsts) == 1
    if alone and dst.blocked_in is not None:
        empty = dst.blocked_in
    return replace(c, full_fraction=src.blocked_out, empty_fraction=empty)


def _busier_beyond(
    stage: StageBreakdown, by_stage: dict[str, StageBreakdown], ctx: Context
) -> bool:
    """Whether ``stage`` hands its items over (alone, by calling: no capacity) to a stage, or
    along a chain of such hand-overs, that is busy past the threshold and busier than it: a
    producer waiting on ``stage`` waits on that one (streamz's ``map_async``, half busy while
    its tasks wait for the loop, calling the ``map`` that computes on it)."""
    seen = {stage.stage}
    at = stage
    while True:
        outs = [o for o in ctx.channels if at.stage in o.srcs]
        if len(outs) != 1 or outs[0].full_fraction is not None or len(outs[0].dsts) != 1:
            return False
        nxt = by_stage.get(outs[0].dsts[0])
        if nxt is None or nxt.stage in seen or nxt.busy is None:
            return False
        if nxt.busy >= ctx.busy_threshold and nxt.busy > (stage.busy or 0.0):
            return True
        seen.add(nxt.stage)
        at = nxt


def _units(ctx: Context) -> tuple[list[Unit], list[str]]:
    """Every stage group with its figures, and the stages without states (aliases aside)."""
    by_stage, chans = _by_name(ctx)
    observed = (b.stage for b in ctx.stages if b.busy is not None)
    groups = stage_groups(ctx.run.topology, observed)
    aliases = {a for g in groups for a in g.aliases}
    unobserved = [b.stage for b in ctx.stages if b.busy is None and b.stage not in aliases]
    return [unit(g, by_stage, chans) for g in groups], unobserved


def _candidates(ctx: Context, units: Sequence[Unit]) -> list[Candidate]:
    """The units the rule picks, in topology order; a group that is not rate-limiting on
    average gives way to its stragglers."""
    by_stage, chans = _by_name(ctx)
    cands: list[Candidate] = []
    for u in units:
        if u.role == "source":
            continue  # see _no_bottleneck
        # (A stage no channel is seen to feed, a program's worker whose queue is its
        # library's own, is judged by its states alone: busy, it limits the rate.)
        cand = judge(u, ctx.busy_threshold, ctx.mostly)
        if cand is not None:
            cands.append(cand)
        elif u.group.replicas:
            topo = ctx.run.topology
            cands.extend(stragglers(u, by_stage, chans, topo, ctx.busy_threshold, ctx.mostly))
    return cands


#: Kinds of resource whose stages are threads of the pipeline's own process (one lock).
_MAIN_KINDS = ("thread", "asyncio")
#: CPU time of a process's threads beyond this many cores ran without its lock (compiled code).
_ONE_CORE = 1.05


def _interpreter_lock(ctx: Context, units: Sequence[Unit]) -> Finding | None:
    """When no stage is busy enough to be named, the threads of one process that together used
    about one core the whole run (their CPU time, the ``runner`` table): its interpreter lock
    is what they wait for, held by one of them at any time. The unit that used most of it is
    named, with every stage's share."""
    _, rows = ctx.run.sql("SELECT stage, cpu_ns FROM runner")
    cpu = {str(r[0]): int(r[1] or 0) for r in rows}
    dur = ctx.run.duration_ns or 0
    if not cpu or dur <= 0:
        return None
    kinds = {r.name: r.kind for r in ctx.run.topology.resources}
    where: dict[str, str] = {}
    for st in ctx.run.topology.stages:
        kind = kinds.get(st.resource, "thread")
        where[st.name] = "main" if kind in _MAIN_KINDS else st.resource
    found = None
    for proc in sorted(set(where.values())):
        stages = [s for s, p in where.items() if p == proc and s in cpu]
        share = sum(cpu[s] for s in stages) / dur
        if len(stages) > 1 and ctx.busy_threshold <= share <= _ONE_CORE:
            found = (proc, stages, share)
    if found is None:
        return None
    proc, stages, share = found
    mine = [u for u in units if u.ins and any(m in stages for m in u.group.members)]
    if not mine:
        return None
    top = max(mine, key=lambda u: sum(cpu.get(m, 0) for m in u.group.members))
    used = sum(cpu.get(m, 0) for m in top.group.members) / dur
    place = "the pipeline's process" if proc == "main" else proc
    verb = "limit" if top.group.replicas else "limits"
    return Finding(
        "bottleneck",
        "warning",
        top.name,
        f"{top.name} {verb} the rate through the interpreter lock of {place}",
        f"The threads of {place} used {pct(share)} of one core over the run: its interpreter "
        f"lock, which one thread holds at a time while it runs Python, was busy all along. "
        f"{top.name} took {pct(used)} of it; no stage looks saturated by its states, since "
        "waiting for the lock between items shows as waiting on channels.",
        {
            "lock_cpu_share": rounded(share),
            "cpu_share": {s: rounded(cpu[s] / dur) for s in stages},
            "members": list(top.group.members),
        },
        f"move {top.name} to processes of their own (resource=ss.Process(...)), or its work "
        "to code that releases the lock: more threads will not help",
    )


def _missing_states(ctx: Context, units: Sequence[Unit], unobserved: list[str]) -> Finding:
    names = ", ".join(u.group.pattern for u in units if u.ins) or "..."
    end = "." if _any_fill(ctx.channels) else ", and no occupancy histogram was recorded either."
    return Finding(
        "missing_queries",
        "info",
        "",
        "add state(...) queries to locate the bottleneck",
        "No stage's states (idle, busy, blocked) were recorded, so which stage limits the "
        "rate can only be read from how the channels fill" + end,
        {"stages_without_state": unobserved},
        f"query state(STAGE): duty for the stages ({names}) and "
        "occupancy(A -> B): mean, max, histogram for the channels between them",
    )


def _backpressure(ctx: Context, unobserved: list[str]) -> Finding | None:
    """The fullest mostly-full channel, when no stage explains why it is full."""
    full = [
        c for c in ctx.channels if c.full_fraction is not None and c.full_fraction >= ctx.mostly
    ]
    if not full:
        return None
    c = max(full, key=lambda c: c.full_fraction or 0.0)
    frames = level_frames(ctx.series, c.channel, c.capacity, "full", ctx.mostly)
    return Finding(
        "backpressure",
        "warning",
        c.channel,
        f"channel {c.channel} is mostly full, but no stage explains it",
        f"{c.channel} is full {pct(c.full_fraction)} of the time, so {c.src} waits to put, "
        f"yet what was recorded does not show {c.dst} or a stage after it as "
        "rate-limiting.",
        {
            "channel": c.channel,
            "full_fraction": rounded(c.full_fraction),
            "frames": frame_ranges(frames),
            "stages_without_state": unobserved,
        },
        f"query state(...) of {c.dst} and the stages after it, and the occupancy of "
        "their channels, to find where the pipeline is held up",
    )


def _no_bottleneck(ctx: Context, units: Sequence[Unit], unobserved: list[str]) -> Finding:
    observed = [u for u in units if u.busy is not None]
    detail, suggestion = _headroom(ctx, observed)
    if unobserved:
        detail += f" Not observed: {', '.join(unobserved)}."
    evidence: dict[str, Any] = {
        "busy": {m: rounded(b) for u in observed for m, b in u.busy_by_member.items()},
        "full_fraction": {
            c.channel: rounded(c.full_fraction) for c in ctx.channels if c.full_fraction is not None
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


def _headroom(ctx: Context, observed: Sequence[Unit]) -> tuple[str, str]:
    """(detail, suggestion) of ``no_bottleneck``: the busiest stage, the fullest channel, and
    the busy source the pipeline keeps up with."""
    threshold = ctx.busy_threshold
    busiest = max(
        (u for u in observed if u.role != "source"), key=lambda u: u.busy or 0.0, default=None
    )
    fullest = max(
        (c for c in ctx.channels if c.full_fraction is not None),
        key=lambda c: c.full_fraction or 0.0,
        default=None,
    )
    parts = [f"No stage after the sources is busy {pct(threshold)} or more"]
    if busiest is not None:
        avg = " on average" if busiest.group.replicas else ""
        parts[0] += f" (the busiest, {busiest.name}, {pct(busiest.busy)}{avg})"
    if fullest is not None:
        parts.append(
            f"no channel is mostly full (the fullest, {fullest.channel}, {pct(fullest.full_fraction)})"
        )
    detail = " and ".join(parts) + "."
    src = next((u for u in observed if u.role == "source" and (u.busy or 0.0) >= threshold), None)
    if src is None:
        return detail, "nothing to fix in the pipeline: it keeps up with its input"
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
    return detail, f"to go faster, feed {src.name} faster; the stages after it have headroom"
