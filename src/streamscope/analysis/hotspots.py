"""Where each stage's busy time went, from its sampled stacks: its hot functions.

In: a run's ``stacks`` table (``reduction/stacks.py``), optionally only the frames in a window.
Out: per stage, the shares of its busy time its workers ran (on a core, or runnable: its time
waiting for one is its code's, as the program's own clock counts it) and waited (asleep, on I/O
or a lock), and each function's share of that busy time: ``self`` (running in the function
itself: the stack's last frame) and ``total`` (in it or in what it called), largest first; the
functions it waited in. Busy samples only: a worker blocked on its queues or idle is not the
stage's code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamscope.store.run import Run

#: Functions listed per stage at most (``show``, findings, the report).
TOP = 12
#: Where a busy asyncio task waited when it was not running (no stack of its own is read then).
AWAITING = "(awaiting)"
#: The sampled states of a busy worker (``core.records.SampledState``).
BUSY_STATES = ("running", "waiting")


@dataclass(frozen=True, slots=True)
class HotFunction:
    """One function of a stage: ``self_share`` and ``total_share`` of the stage's busy time."""

    function: str
    self_share: float
    total_share: float


@dataclass(frozen=True, slots=True)
class StageStacks:
    """A stage's busy samples: their time, its shares running and waiting, its functions."""

    stage: str
    busy_samples: int
    busy_ns: int
    running: float
    waiting: float
    functions: tuple[HotFunction, ...]
    #: Where it waited (the last frame of the stack then), as shares of the busy time.
    waiting_in: tuple[HotFunction, ...]


def stack_rows(
    run: Run, window: tuple[int, int] | None = None
) -> list[tuple[str, str, str, int, int]]:
    """``(stage, state, stack, samples, ns)`` summed over the run's frames (with ``window``,
    virtual ns, only the frames that start in it)."""
    where = "" if window is None else f"WHERE t_ns >= {int(window[0])} AND t_ns < {int(window[1])}"
    _, rows = run.sql(
        "SELECT stage, state, stack, sum(samples)::BIGINT, sum(ns)::BIGINT FROM stacks "  # noqa: S608
        f"{where} GROUP BY stage, state, stack ORDER BY stage, state, stack"
    )
    return [(str(a), str(b), str(c), int(d), int(e)) for a, b, c, d, e in rows]


def stage_stacks(
    run: Run, window: tuple[int, int] | None = None, top: int = TOP
) -> dict[str, StageStacks]:
    """Each sampled stage's busy time, by function (stages never busy are left out)."""
    return summarize(stack_rows(run, window), top)


def summarize(
    rows: Iterable[tuple[str, str, str, int, int]], top: int = TOP
) -> dict[str, StageStacks]:
    """``stage_stacks`` of rows as ``stack_rows`` gives them."""
    by_stage: dict[str, list[tuple[str, str, int, int]]] = {}
    for stage, state, stack, n, ns in rows:
        if state in BUSY_STATES:
            by_stage.setdefault(stage, []).append((state, stack, n, ns))
    out = {}
    for stage, mine in by_stage.items():
        busy = sum(ns for _, _, _, ns in mine)
        if busy <= 0:
            continue
        self_ns: dict[str, int] = {}
        total_ns: dict[str, int] = {}
        wait_ns: dict[str, int] = {}
        running = 0
        for state, stack, _, ns in mine:
            frames = stack.split(";") if stack else []
            if state == "waiting":
                leaf = frames[-1] if frames else AWAITING
                wait_ns[leaf] = wait_ns.get(leaf, 0) + ns
                continue
            running += ns
            if not frames:
                continue
            self_ns[frames[-1]] = self_ns.get(frames[-1], 0) + ns
            for f in set(frames):
                total_ns[f] = total_ns.get(f, 0) + ns
        funcs = sorted(
            (HotFunction(f, self_ns.get(f, 0) / busy, t / busy) for f, t in total_ns.items()),
            key=lambda h: (-h.self_share, -h.total_share, h.function),
        )
        waits = sorted((HotFunction(f, ns / busy, ns / busy) for f, ns in wait_ns.items()),
                       key=lambda h: (-h.self_share, h.function))  # fmt: skip
        out[stage] = StageStacks(
            stage, sum(n for _, _, n, _ in mine), busy, running / busy, 1 - running / busy,
            tuple(funcs[:top]), tuple(waits[:top]),
        )  # fmt: skip
    return out


def function_name(frame: str) -> str:
    """``scale (img.py:12)`` → ``scale() (img.py:12)``: a frame as a sentence names it (one
    that stands for several, ``(streamscope)`` or ``[other stacks]``, as it is)."""
    if frame[:1] in "([":
        return frame
    name, _, where = frame.partition(" (")
    return f"{name}() ({where}" if where else f"{name}()"


def time_split(s: StageStacks, n: int = 3) -> str:
    """``71 % in scale() (img.py:12), 29 % in blur() (img.py:30)``: its ``n`` hottest
    functions' own shares of its busy time, with the share it waited when worth saying."""
    parts = [f"{round(h.self_share * 100)} % in {function_name(h.function)}"
             for h in s.functions[:n] if h.self_share >= 0.01]  # fmt: skip
    if s.waiting >= 0.05:
        where = f" in {function_name(s.waiting_in[0].function)}" if s.waiting_in else ""
        if s.waiting_in and s.waiting_in[0].function == AWAITING:
            where = " (awaiting)"
        parts.append(f"{round(s.waiting * 100)} % waiting{where}")
    return ", ".join(parts) if parts else "no Python frame sampled"


def where_time_goes(s: StageStacks, n: int = 3) -> str:
    """One line: ``resize: 71 % in scale() (img.py:12), 29 % in blur() (img.py:30)``."""
    return f"{s.stage}: {time_split(s, n)}"


def group_stacks(run: Run, name: str, members: Iterable[str]) -> StageStacks | None:
    """The stacks of a stage, or of a group of replicas (``members``) as one stage ``name``;
    None where none was sampled busy."""
    mine = set(members) | {name}
    rows = [(name, *r[1:]) for r in stack_rows(run) if r[0] in mine]
    return summarize(rows).get(name)


__all__ = [
    "AWAITING",
    "BUSY_STATES",
    "TOP",
    "HotFunction",
    "StageStacks",
    "function_name",
    "group_stacks",
    "stack_rows",
    "stage_stacks",
    "summarize",
    "time_split",
    "where_time_goes",
]
