"""The ``streamscope show --json`` document: a ``Run`` → plain dicts and lists (see JSON.md).

NaN becomes ``null``, as it does in the run file.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.store.schema import FORMAT, SCHEMA_VERSION, quantile_stat

if TYPE_CHECKING:
    from streamscope.store.run import Run


def run_json(run: Run) -> dict[str, Any]:
    """The ``streamscope show --json`` document of ``run`` (documented in JSON.md)."""
    by_query: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for r in run.results():
        by_query.setdefault(r.query_id, {}).setdefault(r.target, []).append(_frame(r))
    queries = []
    for q in run.queries:
        found = by_query.get(q.id, {})
        names = list(q.targets) + sorted(set(found) - set(q.targets))
        query = {k: v for k, v in asdict(q).items() if k not in ("targets", "stats")}
        query["stats"] = list(q.stats)
        query["targets"] = [{"target": t, "frames": found.get(t, [])} for t in names]
        queries.append(query)
    drops = run.drops()
    topo = run.topology
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "run": _run(run),
        "resources": [asdict(x) for x in run.topology.resources],
        "stages": [asdict(x) for x in run.topology.stages],
        "channels": [
            {
                **asdict(c),
                "producers": list(topo.producers(c)),
                "consumers": list(topo.consumers(c)),
            }
            for c in topo.channels
        ],
        "probes": _probes(run, drops),
        "queries": queries,
        "virtual_queues": [_vq(v) for v in run.virtual_queues()],
        "drops": [_drop(run, d) for d in drops],
        "overhead": run.overhead(),
        "monitor": run.monitor_cost(),
        "profiles": run.profiles(),
        "trace_exclusions": run.trace_exclusions(),
        "notes": [{"about": a, "text": t} for a, t in run.notes()],
    }


def _vq(v: dict[str, Any]) -> dict[str, Any]:
    v = {**v, "frames_checked": v.pop("frames")}
    frames = [
        {k: (_j(x) if isinstance(x, float) else x) for k, x in f.items()}
        for f in v.pop("frames_detail")
    ]
    return {**{k: (_j(x) if isinstance(x, float) else x) for k, x in v.items()}, "frames": frames}


def _run(run: Run) -> dict[str, Any]:
    m = run.meta
    return {
        "run_id": m.run_id,
        "name": m.name,
        "app": m.app,
        "command": m.command,
        "argv": list(m.argv),
        "host": m.host,
        "pipeline": run.topology.name,
        "started_unix_ns": m.started_unix_ns,
        "ended_unix_ns": run.ended_unix_ns,
        "duration_ns": run.duration_ns,
        "frame_ns": m.frame_ns,
        "status": run.status,
        "error": run.error,
        "streamscope_version": m.version,
        "t0_host_ns": m.t0_host_ns,
        "probe_core": m.probe_core,
        "cpus": m.cpus,
    }


def _probes(run: Run, drops: list[DropCount]) -> list[dict[str, Any]]:
    """Each probe, with the records it kept and lost over the whole run."""
    kept: dict[int, int] = {}
    lost: dict[int, int] = {}
    for d in drops:
        kept[d.probe_id] = kept.get(d.probe_id, 0) + d.recorded
        lost[d.probe_id] = lost.get(d.probe_id, 0) + d.dropped
    return [
        {**asdict(p), "dropped": lost.get(p.id, 0), "recorded": kept.get(p.id, 0)}
        for p in run.topology.probes
    ]


def _drop(run: Run, d: DropCount) -> dict[str, Any]:
    probe = next((p for p in run.topology.probes if p.id == d.probe_id), None)
    return {
        "probe_id": d.probe_id,
        "kind": probe.kind if probe else None,
        "target": probe.target if probe else None,
        "frame": d.frame,
        "dropped": d.dropped,
        "recorded": d.recorded,
    }


def _frame(r: FrameResult) -> dict[str, Any]:
    stats: dict[str, float | None] = {}
    histogram: dict[str, Any] | None = None
    duty: dict[str, float | None] | None = None
    for p in r.points:
        if isinstance(p, ScalarPoint):
            stats[p.stat] = _j(p.value)
        elif isinstance(p, QuantilesPoint):
            for q, v in zip(p.qs, p.values, strict=True):
                stats[quantile_stat(q)] = _j(v)
        elif isinstance(p, HistogramPoint):
            histogram = {
                "edges": [_j(e) for e in p.edges],
                "weights": [_j(w) for w in p.weights],
                "under": _j(p.under),
                "over": _j(p.over),
            }
        elif isinstance(p, DutyPoint):
            duty = duty or {}
            duty.update((k, _j(v)) for k, v in zip(p.labels, p.fractions, strict=True))
    return {
        "frame": r.frame,
        "t_start_ns": r.t_start_ns,
        "t_end_ns": r.t_end_ns,
        "covered_ns": r.covered_ns,
        "stats": stats,
        "histogram": histogram,
        "duty": duty,
    }


def _j(v: float | None) -> float | None:
    """JSON has no NaN: it becomes null, as in the file."""
    return None if v is None or math.isnan(v) else v
