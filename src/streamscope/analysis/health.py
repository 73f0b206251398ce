"""Findings passes about the run itself and the trust its figures deserve.

In: a ``Context``. Out: ``Finding``s for a run that failed or never finished (``run_status``), what
it said of itself (``notes``: nothing seen, processes that outlived the program), stages
that stalled (``stalls``), probe records lost (``drops``), causality violations across clock domains
(``violations``) and rejected queue models of link channels (``virtual_queues``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamscope.analysis.context import Context, Finding
from streamscope.analysis.evidence import frame_ranges, rounded
from streamscope.core.errors import QueryError
from streamscope.core.fmt import pct

#: What a lost-records finding of a process's stack sampler names.
STACK_SAMPLES = "stack samples"


def run_status(ctx: Context) -> list[Finding]:
    """A run that failed, was interrupted or never finished: its figures cover only part of it."""
    run = ctx.run
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


def notes(ctx: Context) -> list[Finding]:
    """What the run said of itself: a program in which nothing was seen (and what it used that
    is not watched), processes of the program that outlived it, stretches rolled up."""
    said = ctx.run.notes()
    out = []
    empty = [text for about, text in said if about == "empty"]
    if empty:
        out.append(
            Finding(
                "nothing_seen",
                "warning",
                "",
                "nothing of the program was seen"
                if "no stage" in empty[0]
                else "no channel was seen",
                empty[0][0].upper() + empty[0][1:] + ".",
                {"notes": empty},
                "pass the program's items through standard queues, or describe it as a "
                "streamscope Pipeline, to see its stages and channels",
            )
        )
    outlived = [text for about, text in said if about == "outlived"]
    if outlived:
        out.append(
            Finding(
                "outlived",
                "info",
                "",
                f"{len(outlived)} process(es) of the program outlived it",
                "The run ended with the program; these were still running then: "
                + "; ".join(outlived)
                + ".",
                {"processes": outlived},
                "join the processes the program starts if their work is part of the run",
            )
        )
    rolled = [text for about, text in said if about == "rolled_up"]
    if rolled:
        out.append(
            Finding(
                "rolled_up",
                "info",
                "",
                "older frames were rolled up into coarser ones (--keep)",
                rolled[0][0].upper() + rolled[0][1:] + ".",
                {"stretches": [list(s) for s in ctx.run.rolled_up()]},
                "run with a longer --keep to keep more of the run at full resolution",
            )
        )
    return out


def stalls(ctx: Context) -> list[Finding]:
    """Stages busy past the run's stall limit without finishing anything, longest per stage."""
    table = ctx.run.table("stall")
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
                    "seconds": rounded(secs),
                    "ongoing": ongoing,
                    "stalls": sum(1 for s in table["stage"].tolist() if s == stage),
                },
                f"look at what {stage} does with one item (a lock, a blocking call without a "
                "timeout, an endless loop); `streamscope run --trace-stage` shows its calls",
            )
        )
    return out


def drops(ctx: Context) -> list[Finding]:
    """Probes whose buffers refused records: their results in those frames are incomplete."""
    run = ctx.run
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
        if kind == "stacks":
            # a process's stack sampler: its target is where its stack table was kept, a file
            # that is gone, and its samples are of every stage of the process
            target = STACK_SAMPLES
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
                    "fraction": rounded(frac),
                    "frames": frame_ranges(frames.get(pid, [])),
                },
                "give the probes larger buffers (streamscope run --tap-capacity, or "
                "RunOptions.tap_capacity); a device's agent can also flush them more often "
                "(RunOptions.flush_interval_s)",
            )
        )
    return out


def violations(ctx: Context) -> list[Finding]:
    """Queries that timed events before their cause once mapped to virtual time."""
    out = []
    for s in ctx.series:
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


def _share(t: object) -> str:
    return f"{float(t):.0%}" if isinstance(t, (int, float)) else "15%"


def _decided(v: dict[str, Any]) -> str:
    got = v.get("decided_by") or {}
    return ", ".join(f"{n} frames {k}" for k, n in got.items()) or "frames not detailed"


def virtual_queues(ctx: Context) -> list[Finding]:
    """Link channels whose queue model its own self-check rejects."""
    try:
        vqs = ctx.run.virtual_queues()
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
                f"(p = {float(v.get('p_value') or 0.0):.3g}), more than chance explains, by "
                f"more than the tolerance ({_share(v.get('tolerance'))} of the estimate, at "
                f"least one item) or with gaps that are not independent "
                f"({_decided(v)}), so the estimated occupancy of {target} is not reliable.",
                {
                    "query_id": v.get("query_id"),
                    "model": v.get("model"),
                    "frames_checked": v.get("frames"),
                    "frames_rejected": v.get("frames_rejected"),
                    "p_value": v.get("p_value"),
                    "w1_items": v.get("w1_items"),
                    "frames": frame_ranges(rejected),
                    "decided_by": v.get("decided_by"),
                    "tolerance": v.get("tolerance"),
                },
                "check the link's description (bulk size, transfer time, timeout) against the "
                "device, and its clock calibration",
            )
        )
    return out
