"""A realistic three-stage pipeline, written three ways: hand-written threads with ``queue.Queue``,
a streamscope ``Pipeline`` run monitored, and the same ``Pipeline`` run by the bare runner.

In: the work per item of each stage (sized at start-up to given µs). Out: per run, the wall and
CPU time from the source's first item to the sink's last (start-up and shut-down excluded: see
``bench_startup.py`` for those), and each stage thread's own CPU over that window.

The stages: ``parse`` (pure Python: splits and converts a text record), ``transform`` (numpy:
a small FFT and a reduction), ``summarise`` (pure Python: folds the result into a dict).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import streamscope as ss

CAPACITY = 64
#: What monitoring every channel and every stage means here.
EVERY_CHANNEL_AND_STAGE = [
    "occupancy(* -> *): mean, max, histogram",
    "throughput(* -> *): mean",
    "latency(* -> *): mean, p99",
    "state(*): duty",
]


def spin(k: int) -> int:
    """Pure-Python busy work: holds the interpreter lock like user code would."""
    acc = 0
    for i in range(k):
        acc = (acc * 31 + i) % 1_000_003
    return acc


@dataclass(frozen=True, slots=True)
class Work:
    """How much each stage does per item: ``fields`` of the parsed record, ``fft`` 1024-point
    FFTs in the transform, ``spin`` iterations of the summary; ``light``: every stage only spins
    ``spin`` (the fast variant)."""

    fields: int
    fft: int
    spin: int
    light: bool = False

    def record(self, i: int) -> str:
        return ",".join(str((i * 7 + j * 13) % 1000) for j in range(self.fields))

    def parse(self, line: str) -> list[int]:
        if self.light:
            spin(self.spin)
            return [len(line)]
        return [int(x) for x in line.split(",")]

    def transform(self, values: list[int]) -> float:
        if self.light:
            spin(self.spin)
            return float(values[0])
        x = np.resize(np.asarray(values, dtype=np.float64), 1024)
        total = 0.0
        for _ in range(self.fft):
            total += float(np.abs(np.fft.rfft(x)).sum())
            x = x[::-1]
        return total

    def summarise(self, acc: dict[int, float], value: float) -> None:
        spin(self.spin)
        key = int(value) % 17
        acc[key] = acc.get(key, 0.0) + value


def _time_us(fn: Callable[[], Any], n: int = 200) -> float:
    fn()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n / 1e3


def size_work(parse_us: float, transform_us: float, summarise_us: float) -> Work:
    """Parameters that make the stages take about the given µs per item on this machine."""
    fields = 16
    while _time_us(lambda f=fields: Work(f, 64, 0).parse(Work(f, 64, 0).record(3))) < parse_us:  # type: ignore[misc]
        fields *= 2
    lo, hi = fields // 2, fields
    while hi - lo > 4:
        mid = (lo + hi) // 2
        w = Work(mid, 64, 0)
        line = w.record(3)
        if _time_us(lambda w=w, line=line: w.parse(line)) < parse_us:  # type: ignore[misc]
            lo = mid
        else:
            hi = mid
    fields = hi
    fft = 1
    vals = list(range(fields))
    while _time_us(lambda n=fft: Work(fields, n, 0).transform(vals)) < transform_us and fft < 1000:  # type: ignore[misc]
        fft += 1
    k = 16
    while _time_us(lambda k=k: spin(k)) < summarise_us:  # type: ignore[misc]
        k = int(k * 1.25) + 1
    return Work(fields, fft, k)


def size_for_rate(
    items_s: float, shares: tuple[float, float, float] = (40, 115, 60), rounds: int = 6
) -> Work:
    """Stage work in the proportions ``shares`` (µs), scaled until the hand-written pipeline
    runs at about ``items_s`` items per second here (numpy gives up the interpreter lock for
    part of its work, so the stages' sum is more than the time per item)."""
    scale = 1.0
    work = size_work(*shares)
    for _ in range(rounds):
        wall_us = hand_written(work, 3000).per_item()[0]
        ratio = wall_us * items_s / 1e6  # > 1: too slow
        if abs(ratio - 1) < 0.08:
            break
        scale /= ratio
        work = size_work(*(x * scale for x in shares))
    return work


def size_light(stage_us: float) -> Work:
    """Stages that only spin, about ``stage_us`` each."""
    reps = max(20, int(20_000 / max(stage_us, 1.0)))
    k = 2
    while _time_us(lambda k=k: spin(k), reps) < stage_us:  # type: ignore[misc]
        k *= 2
    lo, hi = k // 2, k
    while hi - lo > max(2, lo // 50):
        mid = (lo + hi) // 2
        if _time_us(lambda mid=mid: spin(mid), reps) < stage_us:  # type: ignore[misc]
            lo = mid
        else:
            hi = mid
    return Work(1, 1, hi, light=True)


@dataclass(slots=True)
class Window:
    """The stamps a run's stages take: (wall, CPU) ns at the first item and after the last, and
    each stage thread's own CPU ns between its first item and its last."""

    stamps: list[tuple[int, int]] = field(default_factory=list)
    stage_cpu: dict[str, int] = field(default_factory=dict)
    items: int = 0

    def stamp(self) -> None:
        self.stamps.append((time.perf_counter_ns(), time.process_time_ns()))

    def per_item(self) -> tuple[float, float, float]:
        """(wall µs, process CPU µs, stage threads' CPU µs) per item."""
        if len(self.stamps) != 2 or len(self.stage_cpu) != 3:
            raise RuntimeError(f"the run did not finish: {self.stamps} {self.stage_cpu}")
        (w0, c0), (w1, c1) = self.stamps
        n = self.items * 1e3
        return (w1 - w0) / n, (c1 - c0) / n, sum(self.stage_cpu.values()) / n


class _StageClock:
    """A stage thread's CPU from its first item to its last."""

    def __init__(self, name: str, win: Window) -> None:
        self.name, self.win, self.t0 = name, win, 0

    def first(self) -> None:
        self.t0 = time.thread_time_ns()

    def last(self) -> None:
        self.win.stage_cpu[self.name] = time.thread_time_ns() - self.t0


def pipeline(work: Work, n: int, win: Window) -> ss.Pipeline:
    """parse -> transform -> summarise as a streamscope Pipeline."""
    win.items = n
    clocks = {s: _StageClock(s, win) for s in ("parse", "transform", "summarise")}
    acc: dict[int, float] = {}
    lines = [work.record(i) for i in range(n)]

    def parse() -> Iterator[list[int]]:
        win.stamp()
        clocks["parse"].first()
        for line in lines:
            yield work.parse(line)
        clocks["parse"].last()

    seen = [0, 0]

    def transform(values: list[int]) -> float:
        if seen[0] == 0:
            clocks["transform"].first()
        seen[0] += 1
        out = work.transform(values)
        if seen[0] == n:
            clocks["transform"].last()
        return out

    def summarise(value: float) -> None:
        if seen[1] == 0:
            clocks["summarise"].first()
        seen[1] += 1
        work.summarise(acc, value)
        if seen[1] == n:
            clocks["summarise"].last()
            win.stamp()

    p = ss.Pipeline("realistic")
    p.add("parse", parse)
    p.add("transform", transform)
    p.add("summarise", summarise)
    p.chain("parse", "transform", "summarise", capacity=CAPACITY)
    return p


def hand_written(work: Work, n: int) -> Window:
    """The same three stages as plain threads joined by two ``queue.Queue``."""
    win = Window(items=n)
    clocks = {s: _StageClock(s, win) for s in ("parse", "transform", "summarise")}
    lines = [work.record(i) for i in range(n)]
    q1: queue.Queue[Any] = queue.Queue(CAPACITY)
    q2: queue.Queue[Any] = queue.Queue(CAPACITY)
    acc: dict[int, float] = {}

    def parse() -> None:
        win.stamp()
        clocks["parse"].first()
        for line in lines:
            q1.put(work.parse(line))
        clocks["parse"].last()
        q1.put(None)

    def transform() -> None:
        seen = 0
        while (values := q1.get()) is not None:
            if seen == 0:
                clocks["transform"].first()
            seen += 1
            out = work.transform(values)
            if seen == n:
                clocks["transform"].last()
            q2.put(out)
        q2.put(None)

    def summarise() -> None:
        seen = 0
        while (value := q2.get()) is not None:
            if seen == 0:
                clocks["summarise"].first()
            seen += 1
            work.summarise(acc, value)
            if seen == n:
                clocks["summarise"].last()
                win.stamp()

    threads = [threading.Thread(target=f) for f in (parse, transform, summarise)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return win
