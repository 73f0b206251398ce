"""A change to a program's model said in the program's own terms: what to change in it to get
what the prediction says (``in_program_terms``: "4 threads running resize", "Pool(4)",
"maxsize=64 on decode -> resize").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamscope.analysis.whatif.kinds import Change


def worker_kind(kind: str, resources: Sequence[str]) -> str:
    """How a program runs a stage's workers: ``threads``, ``tasks``, ``Pool`` (a
    ``multiprocessing.Pool``'s), ``executor`` (a ``ProcessPoolExecutor``'s) or ``processes``,
    from its workers' resource kind and names."""
    if kind == "asyncio":
        return "tasks"
    if kind != "process":
        return "threads"
    if resources and all("PoolWorker" in r for r in resources):
        return "Pool"
    if resources and all(r.startswith(("ForkProcess", "SpawnProcess", "ForkServerProcess"))
                         for r in resources):  # fmt: skip
        return "executor"
    return "processes"


def in_program_terms(ch: Change, how: Mapping[str, str]) -> str:
    """What to change in the program for ``ch`` (``how``: each stage's ``worker_kind``);
    "" where the change is not the program's to make (``cpus``: the machine's)."""
    if ch.attr == "cpus":
        return f"{int(ch.value)} CPUs"
    if ch.attr == "capacity":
        return f"maxsize={int(ch.value)} on the queue {ch.target}"
    if ch.attr == "speed" and ch.function:
        return f"{ch.function}() in {ch.target} {ch.value:g}x as fast"
    if ch.attr == "speed":
        return f"{ch.target}'s code {ch.value:g}x as fast"
    n = int(ch.value)
    kind = how.get(ch.target, "threads")
    if kind == "Pool":
        return f"Pool({n}) for {ch.target}"
    if kind == "executor":
        return f"ProcessPoolExecutor(max_workers={n}) for {ch.target}"
    one = {"threads": "thread", "tasks": "task", "processes": "process"}[kind]
    return f"{n} {one if n == 1 else kind} running {ch.target}"


__all__ = ["in_program_terms", "worker_kind"]
