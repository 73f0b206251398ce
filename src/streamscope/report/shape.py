"""The shape of a run as ``show`` prints it: where its stages ran, a program's stages (their
workers and how each name was found) and its channels (who puts into each, who takes).

In: a ``Run``. Out: rich tables (None where a table has nothing to say).
"""

from __future__ import annotations

from rich.table import Table

from streamscope.core.topology import FAMILY_AT, ChannelInfo, family
from streamscope.store.reader import Run

#: How a program's stage name was found, in words (``StageInfo.named_by``).
NAMED_BY = {
    "given": "the name the program gave its thread, process or task",
    "function": "the program's function its workers run",
    "target": "what its workers were started with (a library's; nothing of the program's in it)",
    "place": "numbered in the order stages appeared: another stage has its name",
    "main": "the program's main thread",
}


def stages_table(run: Run) -> Table | None:
    """A program's stages: each one's workers and how its name was found (None for a
    pipeline's, whose names are the pipeline's own)."""
    stages = run.topology.stages
    if not any(s.named_by for s in stages):
        return None
    workers: dict[str, int] = {}
    for p in run.topology.probes:
        if p.kind == "state":
            workers[p.target] = workers.get(p.target, 0) + 1
    table = Table(title="stages", title_justify="left")
    for col in ("stage", "workers", "named after"):
        table.add_column(col)
    rows = [(st.name, workers.get(st.name, 0), st.named_by) for st in stages]
    for name, n, how_by in _grouped(rows):
        table.add_row(name, str(n), NAMED_BY.get(how_by, how_by or "-"))
    return table


def _grouped(rows: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """(name, workers, how named) per stage; past ``FAMILY_AT`` stages, one row per family of
    numbered ones (``produce #26``: ``produce``, a family of N), their workers added."""
    if len(rows) <= FAMILY_AT:
        return rows
    groups: dict[str, list[tuple[str, int, str]]] = {}
    for row in rows:
        groups.setdefault(family(row[0]), []).append(row)
    return [
        members[0] if len(members) == 1
        else (f"{fam} (a family of {len(members)})", sum(m[1] for m in members), members[0][2])
        for fam, members in groups.items()
    ]  # fmt: skip


def resources_table(run: Run) -> Table | None:
    """Where the stages ran, grouped by resource (a host, a device, a process): its kind, its
    clock domain, its stages. None when every stage ran in the pipeline's own process."""
    rs = run.topology.resources
    if all(r.kind in ("thread", "asyncio") for r in rs):
        return None
    table = Table(title="resources", title_justify="left")
    for col in ("resource", "kind", "clock", "stages"):
        table.add_column(col)
    on = stages_on(run)
    for r in rs:
        table.add_row(r.name, r.kind, r.clock_domain, ", ".join(on.get(r.name, ())))
    return table


def stages_on(run: Run) -> dict[str, list[str]]:
    """Each resource's stages: those declared on it, and those any of whose workers ran there
    (table ``worker``: a stage of several processes is on each of them)."""
    on: dict[str, list[str]] = {}
    for st in run.topology.stages:
        on.setdefault(st.resource, []).append(st.name)
    workers = run.table("worker")
    for stage, resource in zip(workers["stage"], workers["resource"], strict=True):
        names = on.setdefault(str(resource), [])
        if str(stage) not in names:
            names.append(str(stage))
    return on


def pipeline_table(run: Run) -> Table:
    """The run's channels: name, the stages that put into it and take from it, capacity,
    transport."""
    table = Table(title="pipeline", title_justify="left")
    for col in ("channel", "from", "to", "capacity", "transport"):
        table.add_column(col)
    topo = run.topology
    chans = topo.channels
    if len(chans) <= FAMILY_AT:
        for c in chans:
            producers, consumers = ", ".join(topo.producers(c)), ", ".join(topo.consumers(c))
            table.add_row(c.name, producers, consumers, str(c.capacity), c.transport)
        return table
    groups: dict[str, list[ChannelInfo]] = {}
    for c in chans:
        groups.setdefault(family(c.name), []).append(c)
    for fam, members in groups.items():
        c = members[0]
        name = c.name if len(members) == 1 else f"{fam} (a family of {len(members)})"
        caps = sorted({str(m.capacity) for m in members})
        producers = ", ".join(dict.fromkeys(s for m in members for s in topo.producers(m)))
        consumers = ", ".join(dict.fromkeys(s for m in members for s in topo.consumers(m)))
        table.add_row(name, producers, consumers, "/".join(caps), c.transport)
    return table


__all__ = ["NAMED_BY", "pipeline_table", "resources_table", "stages_on", "stages_table"]
