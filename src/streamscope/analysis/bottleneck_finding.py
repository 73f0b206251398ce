"""The finding that names the rate-limiting stage, or group of replicas, and says why.

In: the ``Candidate`` the bottleneck pass chose, the other candidates' names, the stages without
states, and the ``Context``. Out: one ``bottleneck`` ``Finding``: its title, a few sentences with
the numbers, the evidence (figures and the frames that show them) and what to do about it.
"""

from __future__ import annotations

from typing import Any

from streamscope.analysis.breakdown import ChannelSummary
from streamscope.analysis.candidates import Candidate, Unit
from streamscope.analysis.context import Context, Finding
from streamscope.analysis.evidence import busy_frames, frame_ranges, level_frames, rounded
from streamscope.analysis.groups import range_label
from streamscope.analysis.hotspots import group_stacks, time_split
from streamscope.core.fmt import pct

_NO_BUFFER = "a larger buffer will not help"


def bottleneck_finding(
    c: Candidate, others: list[str], unobserved: list[str], ctx: Context
) -> Finding:
    """The ``bottleneck`` finding for ``c``; ``others``: the other candidates, near saturation."""
    u = c.unit
    evidence = _figures(c, ctx)
    detail = _detail(u, _sentence(c))
    missing = _missing(c)
    if missing:
        detail += " Not confirmed: " + " and ".join(missing) + "."
        evidence["missing"] = missing
    title, suggestion = _title(u), _suggestion(u)
    grp = c.straggler_of
    if grp is not None and not u.group.replicas:
        detail += (
            f" {u.name} is one of {len(grp.group.members)} replicas ({grp.name}), which are busy "
            f"only {pct(grp.busy)} on average: it is slower than the others or gets more of "
            "the work, and where work is dealt in turn the others wait for it."
        )
        evidence |= {"replicas_of": grp.name, "replicas_busy": rounded(grp.busy)}
        suggestion = (
            f"find why {u.name} is slower than the other replicas in {grp.name} (its resource, "
            "its share of the work), or deal work to whichever replica is free; "
            "more replicas will not help while one lags"
        )
    if others:
        detail += f" Also near saturation: {', '.join(others)}."
        evidence["other_candidates"] = others
    if unobserved:
        evidence["stages_without_state"] = unobserved
    hot = group_stacks(ctx.run, u.name, u.group.members)
    if hot is not None:
        evidence["where_time_goes"] = time_split(hot)
        detail += f" Its busy time: {evidence['where_time_goes']}."
        evidence["hot_functions"] = [
            {"function": h.function, "self": rounded(h.self_share),
             "total": rounded(h.total_share)}
            for h in hot.functions[:5]
        ]  # fmt: skip
        evidence["waiting"] = rounded(hot.waiting)
    producers = list(dict.fromkeys(s for ch in u.ins for s in ch.srcs or (ch.src,)))
    if producers:
        evidence["producers"] = producers
    return Finding("bottleneck", c.severity, u.name, title, detail, evidence, suggestion)


def _figures(c: Candidate, ctx: Context) -> dict[str, Any]:
    """The evidence's figures: who, the channels judged, and the states."""
    u, g = c.unit, c.unit.group
    evidence: dict[str, Any] = {"stage": u.name, "role": u.role, "score": rounded(c.score)}
    if g.replicas:
        evidence |= {"members": list(g.members), "replicas": len(g.members)}
    if g.aliases:
        evidence["aliases"] = list(g.aliases)
    evidence |= _channel_figures(c, ctx)
    if u.busy is not None:
        evidence |= _state_figures(u, ctx)
    return evidence


def _channel_figures(c: Candidate, ctx: Context) -> dict[str, Any]:
    u, many = c.unit, c.unit.group.replicas
    out: dict[str, Any] = {}
    if c.in_chs:
        out |= {
            "input_channel": c.in_chs[0].channel,
            "input_full_fraction": rounded(c.in_full),
            "input_full_frames": _channel_frames(c.in_chs, "full", ctx),
        }
        if many:
            out["input_channels"] = {ch.channel: rounded(ch.full_fraction) for ch in c.in_chs}
    if c.out_chs:
        out |= {
            "output_channel": c.out_chs[0].channel,
            "output_empty_fraction": rounded(c.out_empty),
            "output_empty_frames": _channel_frames(c.out_chs, "empty", ctx),
        }
        if many:
            out["output_channels"] = {ch.channel: rounded(ch.empty_fraction) for ch in c.out_chs}
    thr = [ch.throughput_per_s for ch in u.ins if ch.throughput_per_s is not None]
    if many and thr and len(thr) == len(u.ins):
        out["throughput_per_s"] = rounded(sum(thr))  # all that the replicas take in, together
    return out


def _state_figures(u: Unit, ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if u.group.replicas:
        out["busy_by_member"] = {m: rounded(b) for m, b in u.busy_by_member.items()}
    return out | {
        "busy": rounded(u.busy),
        "idle": rounded(u.idle),
        "blocked_in": rounded(u.blocked_in),
        "blocked_out": rounded(u.blocked_out),
        "busy_frames": frame_ranges(busy_frames(ctx.series, u.group.members, ctx.busy_threshold)),
        "state_frames": frame_ranges(u.frames),
    }


def _channel_frames(chs: tuple[ChannelSummary, ...], which: str, ctx: Context) -> list[list[int]]:
    """Frames in which any of ``chs`` was mostly full (``which='full'``) or mostly empty."""
    frames: set[int] = set()
    for ch in chs:
        frames.update(level_frames(ctx.series, ch.channel, ch.capacity, which, ctx.mostly))
    return frame_ranges(frames)


def _sentence(c: Candidate) -> str:
    """What the run shows, in one sentence: its channels' fill, then (or first, for a group)
    how busy it is."""
    u, many = c.unit, c.unit.group.replicas
    parts: list[str] = []
    if c.in_chs:
        parts.append(_channels_part(c.in_chs, "into", "them" if many else u.name, c.in_full))
    if c.out_chs:
        parts.append(_channels_part(c.out_chs, "out of", "them" if many else "it", c.out_empty))
    if u.busy is not None and many:
        lo, hi = min(u.busy_by_member.values()), max(u.busy_by_member.values())
        each = f"{pct(lo)} to {pct(hi)} each" if len(u.busy_by_member) > 1 else "one measured"
        parts.insert(0, f"they are busy {pct(u.busy)} of the time on average ({each})")
    elif u.busy is not None:
        parts.append(f"{u.name} is busy {pct(u.busy)}")
    return "; ".join(parts)


def _channels_part(chs: tuple[ChannelSummary, ...], way: str, whom: str, frac: float | None) -> str:
    """``the channel into work (src -> work) is full 90 %``; several: their mean, unnamed."""
    state = "full" if way == "into" else "empty"
    verb = "is " if way == "into" else ""
    if len(chs) == 1:
        return f"the channel {way} {whom} ({chs[0].channel}) {verb}{state} {pct(frac)}"
    verb = "are " if way == "into" else ""
    return f"the {len(chs)} channels {way} {whom} {verb}{state} {pct(frac)} on average"


def _detail(u: Unit, sentence: str) -> str:
    """The sentence in its paragraph: what the stage is and what its rate does to the others."""
    name, g, sink = u.name, u.group, u.role == "sink"
    if not g.replicas:
        if sentence.startswith("the "):  # a stage's name keeps its case
            sentence = "T" + sentence[1:]
        detail = sentence + " of the time, over the whole run."
        if sink:
            return detail + f" As the sink, {name} sets the rate of everything before it."
        return detail + f" Stages before {name} wait for it, stages after it starve."
    fed = dict.fromkeys(s for ch in u.ins for s in ch.srcs or (ch.src,))
    feeding = dict.fromkeys(d for ch in u.outs for d in ch.dsts or (ch.dst,))
    near = [f"fed by {', '.join(fed)}"] if u.ins else []
    near += [f"feeding {', '.join(feeding)}"] if u.outs else []
    where = f" ({', '.join(near)})" if near else ""
    detail = (
        f"{name} are {len(g.members)} parallel replicas of one stage{where}, judged "
        f"together. Over the whole run, {sentence}."
    )
    if sink:
        return detail + " As the sinks, they set the rate of everything before them."
    return detail + " Stages before them wait for them, stages after them starve."


def _missing(c: Candidate) -> list[str]:
    """What was not measured, so the finding is not confirmed."""
    u, g = c.unit, c.unit.group
    missing = []
    if u.busy is None:
        missing.append(f"state({g.pattern}) was not queried")
    elif g.replicas and len(u.busy_by_member) < len(g.members):
        quiet = [m for m in g.members if m not in u.busy_by_member]
        missing.append(f"state({range_label(quiet)}) was not queried")
    if c.partial:
        # (Their mean occupancy may be known: how often they were empty needs an occupancy
        # histogram whose bins single out level 0, which an unbounded queue's may not have.)
        missing.append(f"how often the channels out of {u.name} were empty was not measured")
    return missing


def _title(u: Unit) -> str:
    if not u.group.replicas:
        return f"stage {u.name} is rate-limiting"
    title = f"{u.name} are rate-limiting together"
    if u.busy is not None:
        title += f" (busy {pct(u.busy)} on average)"
    return title


def _suggestion(u: Unit) -> str:
    if not u.group.replicas:
        return f"give {u.name} more parallelism or make it faster; {_NO_BUFFER}"
    stem = u.group.stem.rstrip("-_. ")
    return f"add replicas (more {stem} stages) or make each faster; " + _NO_BUFFER
