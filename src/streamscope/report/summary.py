"""Run-level tables over a run file: the closing summary of ``run`` and the body of ``show``.

In: a ``Run`` (or a run file's path). Out: rich tables and lines, printed on a console.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamscope.aggregate.points import DutyPoint, FrameResult, ScalarPoint
from streamscope.core.fmt import fmt_ns, fmt_value, pct
from streamscope.core.topology import FAMILY_AT, HOST, family
from streamscope.report.shape import pipeline_table, resources_table, stages_table
from streamscope.report.terminal import describe_points
from streamscope.store.reader import Run
from streamscope.store.run import SETUP


def _overall(frames: list[FrameResult], unit: str) -> str:
    """Whole-run figures from the frames: covered-time-weighted mean, extremes, duty."""
    parts: list[str] = []
    w = [f.covered_ns for f in frames]
    stats: dict[str, list[tuple[float, int]]] = {}
    duty: dict[str, float] = {}
    duty_w = 0
    for f, wt in zip(frames, w, strict=True):
        for p in f.points:
            if isinstance(p, ScalarPoint) and p.value is not None and not math.isnan(p.value):
                stats.setdefault(p.stat, []).append((p.value, wt))
            elif isinstance(p, DutyPoint) and sum(p.fractions) > 0:  # 0: nothing observed
                duty_w += wt
                for label, frac in zip(p.labels, p.fractions, strict=True):
                    duty[label] = duty.get(label, 0.0) + frac * wt
    for stat, vals in stats.items():
        if stat == "mean":
            den = sum(wt for _, wt in vals)
            v = sum(x * wt for x, wt in vals) / den if den else None
        elif stat == "min":
            v = min(x for x, _ in vals)
        elif stat in ("max", "uncertainty_ns"):
            v = max(x for x, _ in vals)
        else:
            v = sum(x for x, _ in vals)
        if stat == "uncertainty_ns":  # the widest frame's bounds, as a frame's are written
            parts.append(f"uncertainty=±{fmt_value(v, 'ns')}")
            continue
        counted = stat in ("count", "violations")  # numbers of items or events, not the unit
        parts.append(f"{stat}={fmt_value(v, 'items' if counted else unit)}")
    if duty and duty_w:  # as the live view writes a frame's (``busy=95%``)
        parts.extend(f"{k}={v / duty_w * 100:.0f}%" for k, v in duty.items() if v / duty_w > 0.005)
    return "  ".join(parts) or "(no data)"


def print_run(run: Run, console: Console, last: int | None = None) -> None:
    """What ``show`` prints of a run: how it went, its pipeline and clocks, each query's frames
    (the ``last`` N of each if given), its virtual queues, its summary, its profiles, what the
    monitoring cost, and the probe records it dropped."""
    m = run.meta
    console.print(
        f"[bold]{escape(m.name)}[/]  app={escape(m.app or '-')}  "
        f"status=[bold]{escape(run.status)}[/]  duration={fmt_ns(run.duration_ns)}  frame={fmt_ns(m.frame_ns)}",
        markup=True,
    )
    if run.error:
        console.print(f"[red]error:[/] {escape(run.error)}", markup=True)
    print_notes(run, console)
    tables = [
        resources_table(run),
        stages_table(run),
        pipeline_table(run),
        clock_table(run),
        *(frames_table(run, q.id, last) for q in run.queries),
        vq_table(run),
        summary_table(run),
        profile_table(run),
        hot_table(run),
        overhead_table(run),
        drops_table(run),
    ]
    for table in tables:
        if table is not None:
            console.print(table)


def print_notes(run: Run, console: Console) -> None:
    """What the run says of itself besides its figures (processes that outlived the program,
    nothing seen and why)."""
    for _about, text in run.notes():
        console.print(f"[yellow]note:[/] {escape(text)}", markup=True, highlight=False)


def drops_table(run: Run) -> Table | None:
    """Each probe's dropped records per frame, if any were dropped."""
    drops = [d for d in run.drops() if d.dropped]
    if not drops:
        return None
    table = Table(title="dropped probe records", title_justify="left")
    for col in ("probe", "frame", "dropped", "recorded"):
        table.add_column(col)
    names = {p.id: f"{p.kind} {p.target}" for p in run.topology.probes}
    for d in drops:
        table.add_row(
            names.get(d.probe_id, str(d.probe_id)), str(d.frame), str(d.dropped), str(d.recorded)
        )
    return table


def summary_table(run: Run) -> Table:
    table = Table(title=f"summary of {run.meta.name} ({run.status})")
    table.add_column("query")
    table.add_column("target")
    table.add_column("frames", justify="right")
    table.add_column("over the whole run")
    for q in run.queries:
        by_target: dict[str, list[FrameResult]] = {t: [] for t in q.targets}
        for f in run.results(q.id):
            by_target.setdefault(f.target, []).append(f)
        for target, members, frames in _families(by_target):
            shown = target if members == 1 else f"{target} (a family of {members})"
            table.add_row(q.text, shown, str(len(frames)), _overall(frames, q.unit))
    return table


def _families(
    by_target: dict[str, list[FrameResult]],
) -> list[tuple[str, int, list[FrameResult]]]:
    """(target or family, how many targets, their frames), in the targets' order."""
    if len(by_target) <= FAMILY_AT:
        return [(t, 1, fs) for t, fs in by_target.items()]
    groups: dict[str, tuple[list[str], list[FrameResult]]] = {}
    for t, fs in by_target.items():
        names, frames = groups.setdefault(family(t), ([], []))
        names.append(t)
        frames.extend(fs)
    return [
        (names[0], 1, frames) if len(names) == 1 else (fam, len(names), frames)
        for fam, (names, frames) in groups.items()
    ]


def overhead_table(run: Run) -> Table | None:
    """The monitoring's own cost per stage (see the ``overhead`` and ``runner`` tables)."""
    rows = run.overhead()
    if not rows:
        return None
    table = Table(title="what monitoring cost (measured while it ran)", title_justify="left")
    cols = ("stage", "probes", "events", "events/s", "probe time", "in its code", "of its time",
            "runner", "of its CPU")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col == "stage" else "right")
    rest = rows[FAMILY_AT:]
    for r in rows[:FAMILY_AT]:
        rate = r["events_per_s"]
        table.add_row(
            r["stage"],
            str(r["probes"]),
            f"{r['events']:,}",
            "-" if rate is None else f"{rate:,.0f}",
            fmt_ns(r["est_probe_ns"]),
            fmt_ns(r["own_code_ns"] or None),
            pct(r["fraction"], 2),
            fmt_ns(r["runner_ns"]),
            pct(r["runner_fraction"], 2),
        )
    if rest:  # the rows come costliest first: what is left, added up
        table.add_row(
            f"and {len(rest)} more", str(sum(r["probes"] for r in rest)),
            f"{sum(r['events'] for r in rest):,}", "-",
            fmt_ns(sum(r["est_probe_ns"] or 0 for r in rest)),
            fmt_ns(sum(r["own_code_ns"] for r in rest) or None),
            pct(sum(r["fraction"] or 0.0 for r in rest), 2), "-", "-",
        )  # fmt: skip
    table.caption = (
        "probe time: one event in 1024 timed in the run, plus Python calls' extra; in its "
        "code: the time its sampled stacks found in streamscope's own code (a program's queue "
        "and thread wrappers too); of its time: the larger of the two, of the time the "
        "program or the pipeline's stages ran; runner: the "
        "stage thread's CPU outside its own code (sampled) and its probes: the loop around it "
        "and its channels\n" + monitor_line(run)
    )
    return table


def monitor_line(run: Run) -> str:
    """The monitor process's own cost and lag, on a line of their own (another process)."""
    m = run.monitor_cost()
    cores = "" if m["cores"] is None else f" ({pct(m['cores'], 1)} of one core)"
    lag = ""
    if m["lag_max_ns"] is not None:
        lag = f"; lag {fmt_ns(m['lag_median_ns'])} typical, {fmt_ns(m['lag_max_ns'])} at most"
        if any(r.clock_domain != HOST for r in run.topology.resources):
            # Not the monitor falling behind: records of another clock wait for the
            # calibration bursts that place them in time.
            lag += " (frames with other clocks' records wait for two calibration bursts)"
    return f"monitor process: {fmt_ns(m['cpu_ns'])} CPU{cores}{lag}"


def profile_table(run: Run, top: int = 12) -> Table | None:
    """Traced functions per stage, most self time first (``top`` per stage)."""
    rows = run.profiles()
    if not rows:
        return None
    table = Table(title="function profiles (traced calls)", title_justify="left")
    for col in ("stage", "function", "calls", "total", "self", "longest"):
        table.add_column(col, justify="left" if col in ("stage", "function") else "right")
    shown: dict[str, int] = {}
    for r in rows:
        n = shown[r["stage"]] = shown.get(r["stage"], 0) + 1
        if n > top:
            continue
        table.add_row(
            r["stage"],
            r["function"],
            f"{r['calls']:,}",
            fmt_ns(r["total_ns"]),
            fmt_ns(r["self_ns"]),
            fmt_ns(r["max_ns"]),
        )
    excluded = run.trace_exclusions()
    if excluded:
        table.caption = "not traced: " + "; ".join(f"{k} ({v})" for k, v in excluded.items())
    return table


def hot_table(run: Run, top: int = 8) -> Table | None:
    """Where each stage's busy time went (its sampled stacks): its ``top`` functions' own and
    inclusive shares, and the share it waited, busiest stage first."""
    from streamscope.analysis.hotspots import function_name, stage_stacks

    stacks = sorted(stage_stacks(run).values(), key=lambda s: -s.busy_ns)
    if not stacks:
        return None
    table = Table(title="where each stage's busy time goes (sampled stacks)", title_justify="left")
    for col in ("stage", "function", "self", "total"):
        table.add_column(col, justify="left" if col in ("stage", "function") else "right")
    for s in stacks:
        first = True
        for h in s.functions[:top]:
            if h.self_share < 0.005 and not first:
                continue
            table.add_row(s.stage if first else "", function_name(h.function),
                          pct(h.self_share), pct(h.total_share))  # fmt: skip
            first = False
        if s.waiting >= 0.005:
            where = function_name(s.waiting_in[0].function) if s.waiting_in else ""
            table.add_row(s.stage if first else "", f"(waiting) {where}".strip(),
                          pct(s.waiting), pct(s.waiting))  # fmt: skip
    _, rows = run.sql("SELECT sum(samples), sum(cpu_ns) FROM stack_sampler")
    n, cpu = rows[0] if rows else (None, None)
    took = ""
    if n and run.duration_ns:
        took = (f"; {int(n):,} samples, the samplers' CPU {fmt_ns(int(cpu or 0))} "
                f"({pct(int(cpu or 0) / run.duration_ns, 2)} of one core over the run)")  # fmt: skip
    table.caption = (
        "shares of each stage's busy time (self: in the function itself; total: with what it "
        f"called){took}"
    )
    return table


def overhead_line(run: Run) -> str | None:
    """What monitoring cost, in two lines: the probes (events, time, the most costly stage) and
    the runner's share of the stages' CPU; then the monitor process."""
    rows = run.overhead()
    if not rows:
        return None
    events = sum(r["events"] for r in rows)
    setup_ns = sum(r["cost_ns"] for r in rows if r["stage"] == SETUP)
    probe_ns = sum(r["est_probe_ns"] for r in rows if r["stage"] != SETUP)
    cost_ns = sum(r["cost_ns"] for r in rows)
    seconds = (run.duration_ns or 0) / 1e9
    rate = f" ({events / seconds:,.0f}/s)" if seconds else ""
    top = rows[0]
    sampled = ""
    if cost_ns - setup_ns > probe_ns:  # the samples found more in its own code than estimated
        sampled = (f", {fmt_ns(cost_ns - setup_ns)} in its own code in the program's threads "
                   "(sampled)")  # fmt: skip
    if setup_ns:
        sampled += f", {fmt_ns(setup_ns)} loading streamscope and making its threads workers and its queues channels"
    worked = run.worked_ns
    share = "" if not worked else f", {pct(cost_ns / worked, 2)} of the {fmt_ns(worked)} it ran"
    runner = [r for r in rows if r["runner_ns"] is not None]
    loop = ""
    if runner:
        cpu = sum(r["cpu_ns"] for r in runner)
        spent = sum(r["runner_ns"] for r in runner)
        loop = f"; runner {pct(spent / cpu if cpu else None, 2)} of the stages' CPU"
    return (
        f"monitoring overhead: {events:,} probe events{rate}, {fmt_ns(probe_ns)} in probes"
        f"{sampled}{share} (most in {top['stage']}){loop}\n{monitor_line(run)}"
    )


def print_summary(run: Run, path: Path, console: Console) -> None:
    """The summary of ``run`` (read from ``path``) after it ended."""
    console.print(summary_table(run))
    vqs = vq_table(run)
    if vqs is not None:
        console.print(vqs)
    line = overhead_line(run)
    if line is not None:
        console.print(line, markup=False, highlight=False)
    print_notes(run, console)
    dropped = sum(d.dropped for d in run.drops())
    if dropped:
        console.print(
            f"{dropped} probe records were dropped; `streamscope show {path}` lists them",
            style="yellow",
        )


def frames_table(run: Run, query_id: int, last: int | None) -> Table:
    q = run.query(query_id)
    table = Table(title=f"q{q.id}: {q.text}", title_justify="left")
    table.add_column("frame", justify="right")
    table.add_column("start", justify="right")
    table.add_column("target")
    table.add_column("values")
    rows = run.results(query_id)
    if last is not None:
        keep = sorted({r.frame for r in rows})[-last:]
        rows = [r for r in rows if r.frame in keep]
    if len(q.targets) > FAMILY_AT:
        # Many numbered targets (a program's queues or workers made as it went): one row per
        # frame and family, its members' figures together.
        by: dict[tuple[int, str], list[FrameResult]] = {}
        for r in rows:
            by.setdefault((r.frame, family(r.target)), []).append(r)
        for (frame, fam), members in sorted(by.items(), key=lambda kv: kv[0]):
            r = members[0]
            if len(members) == 1:
                table.add_row(str(frame), fmt_ns(r.t_start_ns), r.target,
                              describe_points(r.points, q.unit))  # fmt: skip
            else:
                table.add_row(str(frame), fmt_ns(r.t_start_ns),
                              f"{fam} ({len(members)} of the family: each on average)",
                              _overall(members, q.unit))  # fmt: skip
        return table
    for r in rows:
        whole = r.t_end_ns - r.t_start_ns
        partial = "" if r.covered_ns >= whole else f" (partial: {fmt_ns(r.covered_ns)})"
        table.add_row(
            str(r.frame),
            fmt_ns(r.t_start_ns) + partial,
            r.target,
            describe_points(r.points, q.unit),
        )
    return table


def clock_table(run: Run) -> Table | None:
    """Each calibrated clock domain: its bursts, last fit and the width of its hard bounds."""
    fits = run.table("clock_fit")
    if not len(fits.get("domain", [])):
        return None
    table = Table(title="clock domains (host ns = s * (ticks - x0) + b)", title_justify="left")
    for col in ("domain", "bursts", "method", "s (ns/tick)", "bound width", "rtt min", "steps"):
        table.add_column(col)
    for domain in sorted({str(d) for d in fits["domain"].tolist()}):
        sel = fits["domain"] == domain
        last = int(np.flatnonzero(sel)[-1])
        widths = fits["bound_width_ns"][sel]
        table.add_row(
            domain,
            str(int(sel.sum())),
            str(fits["method"][last]),
            f"{float(fits['s_ns_per_tick'][last]):.9f}",
            f"{fmt_ns(float(np.median(widths)))} median, {fmt_ns(float(widths.max()))} max",
            fmt_ns(float(fits["rtt_min_ns"][sel].min())),
            str(int((~fits["feasible"][sel].astype(bool)).sum())),
        )
    return table


def vq_table(run: Run) -> Table | None:
    """Each virtual queue: the run's self-check verdict and distances (items)."""
    vqs = run.virtual_queues()
    if not vqs:
        return None
    table = Table(
        title="virtual queues (occupancy estimated by simulation, checked against the buffers)",
        title_justify="left",
    )
    for col in ("channel", "model", "verdict", "frames rejected", "frames decided by",
                "W1 self-check", "W1 to truth"):  # fmt: skip
        table.add_column(col)
    for v in vqs:
        truth = v["w1_truth_items"]
        ideal = v["w1_truth_ideal_items"]
        arrivals = ", ".join(f"{k} {n}" for k, n in v["arrivals_used"].items())
        iid = v.get("renewal_verdict")
        table.add_row(
            v["target"],
            v["model"] + (f"; arrivals: {arrivals}" if arrivals else ""),
            v["verdict"] + (f"; i.i.d. gaps: {iid}" if iid else ""),
            f"{v['frames_rejected']}/{v['frames']} (p={v['p_value']:.3g})",
            ", ".join(f"{k} {n}" for k, n in v["decided_by"].items()) or "-",
            "-" if v["w1_items"] is None else f"{v['w1_items']:.2f} items",
            "-" if truth is None else f"{truth:.2f} items (ideal queue {ideal:.2f})",
        )
    table.caption = (
        "arrivals: frames simulated with the insertions the device counted per sub-window "
        "(profile) or with independent gaps (renewal); i.i.d. gaps: the self-check's verdict on "
        "a model whose gaps are independent (rejected: the source's gaps depend on each other); "
        "decided by: per frame, what settled its verdict (chance: the buffers match the model "
        "as well as its own replications do; clock: within the clocks' uncertainty too; "
        "tolerance: the buffers tell the model from the link, by less than the tolerance "
        f"({_tolerance(vqs)} of the estimate, at least 1 item); discrepancy: by more, rejected; "
        "dependence: the gaps are not i.i.d., rejected)"
    )
    return table


def _tolerance(vqs: list[dict[str, Any]]) -> str:
    shares = sorted({float(v["tolerance"]) for v in vqs if v.get("tolerance") is not None})
    return "/".join(f"{t:.0%}" for t in shares) or "15%"
