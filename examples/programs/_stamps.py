"""The programs' own stamps: their truth, kept apart from what they print.

Each program here is written the way its library documents, then stamps, with
``time.monotonic_ns()``, the start and end of every item's work in each stage (``work``) and
every item entering and leaving one queue (``entered``, ``left``). Nothing is stamped unless
``PROGRAM_STAMPS`` names a directory: then each process appends its stamps to a file of its
own there, one line a stamp (``kind stage worker t0_ns t1_ns``, tab-separated), and ``truth(dir)`` reads them
all back once the program has ended: each stage's busy share (its time at work over its
working window times the most of its items at work at once: its workers, a task pool's
width) and working window, the queue's time-weighted mean level, and the
whole work window.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

_DIR = os.environ.get("PROGRAM_STAMPS")
_files: dict[int, object] = {}
_lock = threading.Lock()


def _out():  # type: ignore[no-untyped-def]
    pid = os.getpid()
    f = _files.get(pid)
    if f is None:
        with _lock:
            f = _files.get(pid)
            if f is None:
                f = _files[pid] = open(Path(_DIR, f"stamps-{pid}.txt"), "a", buffering=1)  # noqa: SIM115
    return f


def _worker() -> str:
    # asyncio as the program has it: where it never imported it, no task of its runs, and
    # importing it here cost a pool's worker 25 ms after its first item's work (100 ms beside
    # busy cores), a gap in the stamps while the worker was at work all along
    asyncio = sys.modules.get("asyncio")
    task = None
    if asyncio is not None:
        with contextlib.suppress(RuntimeError):
            task = asyncio.current_task()
    who = f"task{id(task)}" if task is not None else f"thread{threading.get_ident()}"
    return f"{os.getpid()}.{who}"


def stamp(kind: str, stage: str, t0: int, t1: int = 0) -> None:
    if _DIR:
        _out().write(f"{kind}\t{stage}\t{_worker()}\t{t0}\t{t1}\n")  # type: ignore[attr-defined]


@contextlib.contextmanager
def work(stage: str) -> Iterator[None]:
    """One item's work in ``stage`` (by the calling thread, task or process)."""
    t0 = time.monotonic_ns()
    try:
        yield
    finally:
        stamp("work", stage, t0, time.monotonic_ns())


@contextlib.contextmanager
def waiting(stage: str) -> Iterator[None]:
    """A wait of ``stage``'s on a queue (the program's own ``get`` or ``put``): where a stage
    stamps its waits, its busy share is the rest of its time, the share a monitor calls busy
    (its work, and what it does between items: a hand-off, a thread waiting for the
    interpreter lock), which its work stamps alone only bound from below."""
    t0 = time.monotonic_ns()
    try:
        yield
    finally:
        stamp("wait", stage, t0, time.monotonic_ns())


def entered(queue: str) -> None:
    """An item entered ``queue`` (just after the program's put, or as the stage before it
    finished the item, where the put is a library's)."""
    stamp("in", queue, time.monotonic_ns())


def left(queue: str) -> None:
    """An item left ``queue`` (just after the program's get, or as the stage after it starts
    the item)."""
    stamp("out", queue, time.monotonic_ns())


def truth(directory: str | Path, trim: float = 0.1) -> dict[str, object]:
    """What the stamps in ``directory`` say: per stage, its workers' busy shares and their mean;
    per queue, its time-weighted mean level over the middle of its life (``trim`` of it left
    out at each end, where it fills and drains) and its maximum; the window from the first
    work stamp to the last (monotonic ns)."""
    works: dict[str, dict[str, list[tuple[int, int]]]] = {}
    moves: dict[str, list[tuple[int, int]]] = {}
    for path in Path(directory).glob("stamps-*.txt"):
        for line in path.read_text().splitlines():
            kind, stage, worker, t0, t1 = line.split("\t")
            if kind == "work":
                works.setdefault(stage, {}).setdefault(worker, []).append((int(t0), int(t1)))
            elif kind == "wait":
                continue
            else:
                moves.setdefault(stage, []).append((int(t0), 1 if kind == "in" else -1))
    stages = {}
    for stage, by_worker in works.items():
        spans = sorted(s for w in by_worker.values() for s in w)
        lo, hi = spans[0][0], max(b for _, b in spans)
        edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
        running = peak = 0
        for _, d in edges:
            running += d
            peak = max(peak, running)
        worked = sum(b - a for a, b in spans)
        stages[stage] = {
            "busy": worked / (peak * (hi - lo)) if hi > lo else 0.0,
            "workers": peak,
            "window": [lo, hi],
        }
    queues = {}
    for name, events in moves.items():
        events.sort()
        start, end = events[0][0], events[-1][0]
        lo, hi = start + (end - start) * trim, end - (end - start) * trim
        level = top = area = 0
        prev = lo
        for t, d in events:
            if t >= hi:
                break
            if t > lo:
                area += level * (t - prev)
                prev = t
            level += d
            top = max(top, level)
        area += level * max(hi - prev, 0)
        queues[name] = {
            "mean": area / (hi - lo) if hi > lo else 0.0,
            "max": top,
            "window": [lo, hi],
        }
    spans = [s for w in works.values() for ss in w.values() for s in ss]
    window = [min(a for a, _ in spans), max(b for _, b in spans)] if spans else [0, 0]
    return {"stages": stages, "queues": queues, "window": window}


def busy_in(directory: str | Path, stage: str, windows: list[tuple[int, int]]) -> list[float]:
    """``stage``'s busy share over each of ``windows`` ([lo, hi), monotonic ns), by its
    stamps: its time at work there over the window's length times the most of its items at
    work at once over the run (its workers); where it stamps its waits on queues
    (``waiting``), the rest of its time."""
    stamps = [
        (kind, int(t0), int(t1))
        for path in Path(directory).glob("stamps-*.txt")
        for kind, name, _, t0, t1 in (line.split("\t") for line in path.read_text().splitlines())
        if kind in ("work", "wait") and name == stage
    ]
    waits = [(a, b) for kind, a, b in stamps if kind == "wait"]
    spans = waits or [(a, b) for kind, a, b in stamps if kind == "work"]
    workers = truth(directory)["stages"][stage]["workers"]  # type: ignore[index]
    out = []
    for lo, hi in windows:
        share = sum(max(0, min(b, hi) - max(a, lo)) for a, b in spans) / (workers * (hi - lo))
        out.append((1.0 - share if waits else share) if hi > lo else 0.0)
    return out
