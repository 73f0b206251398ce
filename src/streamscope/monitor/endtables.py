"""The tables a run's monitor writes once, at its end, besides its frames.

In: what the engine gathered over the run (function profiles, the flight recorder, each worker's
time per state, stalls, the stage threads' own figures, tracing exclusions, each probe's events
and their cost, the emulated clocks' truth). Out: ``(table, columns)`` pairs for the store, each
table only where the run has something for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamscope.aggregate.profile import ProfileBuilder
from streamscope.core.records import STATE_LABELS, Records
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import Topology
from streamscope.monitor.flight import FlightRecorder
from streamscope.monitor.stalls import Stall
from streamscope.reduction.servicetimes import ServiceTimes
from streamscope.reduction.streams import StageStream
from streamscope.timebase.emulated import CLOCK_TRUTH

Table = TableRows
#: ns per event of a probe, and how that was measured (the ``overhead`` table's figures).
CostModel = Callable[[int], tuple[float, str]]
#: A stage's time figures (``pipeline.run.worker.LoopStats``), as the ``runner`` table holds them.
RUNNER_FIELDS = (
    "items",
    "samples",
    "user_ns",
    "cpu_ns",
    "items_out",
    "user_wall_ns",
    "runq_ns",
    "switch_ns",
)
#: A network link's figures (``pipeline.channels.link.link_counts``), as the ``link`` table holds them.
LINK_FIELDS = ("transfers", "late", "late_ns")
#: What a cluster host's agent sent the monitor, and the records it reduced rather than sent.
HOST_FIELDS = ("messages", "bytes", "kept_records")
#: The machine's busy CPU time over the run and the run's wall time (``pipeline.run.runner``);
#: a program's setup of its threads and queues (``runtime.program``).
MACHINE_FIELDS = ("busy_ns", "wall_ns", "setup_ns", "threads", "queues")
#: An RTL device's cores' figures (``pipeline.run.child`` notes them as its run ends).
CORE_FIELDS = ("cycles", "frames", "shifted", "most_shifted")


def record_columns(rec: Records) -> dict[str, Any]:
    """Raw records as the ``record`` table holds them."""
    return {
        "probe_id": rec["probe"].astype(np.int64), "kind": rec["kind"].astype(np.int64),
        "ticks": rec["ticks"], "value": rec["value"],
    }  # fmt: skip


def profile_table(profiles: ProfileBuilder, end_ns: int) -> Iterator[Table]:
    """Each traced stage's functions: calls, total, self and longest time."""
    profiles.finish(end_ns)
    prof = profiles.profiles()
    if prof:
        yield TableRows("profile", {
            "stage": [p.stage for p in prof], "function_id": [p.function for p in prof],
            "calls": [p.calls for p in prof], "total_ns": [p.total_ns for p in prof],
            "self_ns": [p.self_ns for p in prof], "max_ns": [p.max_ns for p in prof],
        })  # fmt: skip


def flight_tables(flight: FlightRecorder) -> Iterator[Table]:
    """The flight recorder's latest records, and how many older ones it let go."""
    if not flight.seen:
        return
    kept = flight.records()
    if len(kept):
        yield TableRows("record", record_columns(kept))
    yield TableRows("flight", {
        "capacity": [flight.capacity], "kept": [len(kept)], "overwritten": [flight.overwritten],
    })  # fmt: skip


def worker_table(
    stages: Mapping[int, StageStream], worker_of: Mapping[int, str]
) -> Iterator[Table]:
    """Each stage worker's (state probe's) resource, ns in each state, and when its first
    state record came."""
    pids = sorted(p for p, s in stages.items() if any(s.spent_ns))
    if not pids:
        return
    spent = [stages[p].spent_ns for p in pids]
    cols: dict[str, list[Any]] = {
        "stage": [stages[p].name for p in pids], "probe_id": pids,
        "resource": [worker_of.get(p, "") for p in pids],
    }  # fmt: skip
    for i, label in enumerate(STATE_LABELS):
        cols[f"{label}_ns"] = [s[i] for s in spent]
    cols["unknown_ns"] = [s[-1] for s in spent]
    cols["began_ns"] = [stages[p].first_record_t for p in pids]
    yield TableRows("worker", cols)


def ended_table(
    ended: Sequence[tuple[str, str, int]], left: Mapping[str, tuple[int, int]]
) -> Iterator[Table]:
    """The channels and stages that ended while the run went on: (kind, name, end ns); and
    the items each channel still held when it or the run ended, with their ns in it."""
    if ended:
        yield TableRows("ended", {
            "kind": [k for k, _, _ in ended], "name": [n for _, n, _ in ended],
            "t_end_ns": [t for _, _, t in ended],
        })  # fmt: skip
    held = sorted((c, n, ns) for c, (n, ns) in left.items() if n > 0)
    if held:
        yield TableRows("leftover", {
            "channel": [c for c, _, _ in held], "items": [n for _, n, _ in held],
            "ns": [ns for _, _, ns in held],
        })  # fmt: skip


def stall_table(rows: Sequence[tuple[Stall, bool]]) -> Iterator[Table]:
    if rows:
        yield TableRows("stall", {
            "stage": [x.stage for x, _ in rows], "start_ns": [x.start_ns for x, _ in rows],
            "end_ns": [x.end_ns for x, _ in rows], "ongoing": [o for _, o in rows],
        })  # fmt: skip


def runner_table(runner: Mapping[str, Mapping[str, int]]) -> Iterator[Table]:
    """Each stage thread's own figures (items, samples, user and CPU time)."""
    yield from _keyed("runner", "stage", RUNNER_FIELDS, runner)


def service_table(service: Mapping[str, Sequence[int]], sampled: ServiceTimes) -> Iterator[Table]:
    """Each stage's service-time samples, a row each: those its runner sent (no CPU time),
    then those its workers' trackers sampled (a program's stages)."""
    rows: list[tuple[str, int, int | None, int | None]] = [
        (n, t, None, None) for n in sorted(service) for t in service[n]
    ]
    rows += [(n, t, c, q) for n in sorted(sampled.kept) for t, c, q in sampled.kept[n]]
    if rows:
        yield TableRows("service", {
            "stage": [r[0] for r in rows], "wall_ns": [r[1] for r in rows],
            "cpu_ns": [r[2] for r in rows], "runq_ns": [r[3] for r in rows],
        })  # fmt: skip


def machine_table(machine: Mapping[str, Mapping[str, int]]) -> Iterator[Table]:
    """The machine's busy CPU time while the stages ran (what else ran beside them)."""
    yield from _keyed("machine", "host", MACHINE_FIELDS, machine)


def link_table(links: Mapping[str, Mapping[str, int]]) -> Iterator[Table]:
    """Each network link's batches sent and late."""
    yield from _keyed("link", "channel", LINK_FIELDS, links)


def host_table(hosts: Mapping[str, Mapping[str, int]]) -> Iterator[Table]:
    """Each cluster host's traffic to the monitor."""
    yield from _keyed("host", "host", HOST_FIELDS, hosts)


def core_table(cores: Mapping[str, Mapping[str, int]]) -> Iterator[Table]:
    """Each RTL device's cores (keys: ``resource/core``)."""
    if cores:
        names = sorted(cores)
        cols: dict[str, list[object]] = {
            "resource": [n.split("/", 1)[0] for n in names],
            "core": [n.split("/", 1)[1] for n in names],
        }
        for field_ in CORE_FIELDS:
            cols[field_] = [int(cores[n].get(field_, 0)) for n in names]
        yield TableRows("core", cols)


def _keyed(
    table: str, key: str, fields: tuple[str, ...], rows: Mapping[str, Mapping[str, int]]
) -> Iterator[Table]:
    """One row per key of ``rows`` (sorted), its ``fields`` as columns."""
    if rows:
        names = sorted(rows)
        cols: dict[str, list[object]] = {key: list(names)}
        for field_ in fields:
            cols[field_] = [rows[name][field_] for name in names]
        yield TableRows(table, cols)


def exclusion_table(excluded: Mapping[str, str]) -> Iterator[Table]:
    """Functions left out of tracing while the run went on, and why."""
    if excluded:
        names = sorted(excluded)
        yield TableRows("trace_exclusion", {"name": names, "reason": [excluded[n] for n in names]})


def overhead_table(probe_events: Mapping[int, int], model: CostModel | None) -> Iterator[Table]:
    """Each probe's events and what recording them cost the application (estimated)."""
    if not probe_events:
        return
    pids = sorted(probe_events)
    events = [probe_events[p] for p in pids]
    per = [model(p) if model is not None else (0.0, "") for p in pids]
    yield TableRows("overhead", {
        "probe_id": pids, "events": events,
        "est_probe_ns": [e * c for e, (c, _) in zip(events, per, strict=True)],
        "ns_per_event": [c for c, _ in per], "measured": [m for _, m in per],
    })  # fmt: skip


def clock_truth_table(truth_dir: str, topology: Topology) -> Iterator[Table]:
    """Validation runs: the emulated clocks' specs and epochs, read only now, after every
    estimate is made, into ``clock_truth``."""
    path = Path(truth_dir) / CLOCK_TRUTH
    if not path.exists():
        return
    clocks = json.loads(path.read_text(encoding="utf-8"))
    domain = {r.name: r.clock_domain for r in topology.resources}
    names = sorted(n for n in clocks if n in domain)
    if names:
        yield TableRows("clock_truth", {
            "domain": [domain[n] for n in names],
            "spec": [str(clocks[n]["spec"]) for n in names],
            "epoch_host_ns": [int(clocks[n]["epoch_host_ns"]) for n in names],
        })  # fmt: skip
