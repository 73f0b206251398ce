"""The twin's stack sampler (see ``_native.StackSampler``): a Python thread that reads its
workers' frames with ``sys._current_frames``.

In: the workers of this process (a thread, or an asyncio task's coroutine and the thread of its
loop), each with its state tracker. Out: the same SAMPLE-of-stack records and the same stack
table file as the native sampler. Unlike it, this one needs the interpreter lock to read a
frame: while a worker runs pure Python, a sample waits for the lock (up to the switch interval),
so its time is under-counted against code that releases the lock; the native sampler is the
one measured against the program's own clock.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
from types import FrameType
from typing import Any

from streamscope.core._twin_ring import Ring
from streamscope.core._twin_state import StateTracker
from streamscope.core.records import SampledState, State

#: See ``_native_stacks.c``.
STACK_DEPTH = 64
STACK_TABLE = 4096
COST_BUDGET = 0.005
PERIOD_MAX_SHIFT = 7
SAMPLER_RESTING = 64
REST_MAX_SHIFT = 7


_SAMPLED = {
    int(State.BUSY): SampledState.RUNNING,
    int(State.BLOCKED_IN): SampledState.BLOCKED_IN,
    int(State.BLOCKED_OUT): SampledState.BLOCKED_OUT,
}


#: See ``SAMPLER_SLOTS`` and ``SAMPLER_STATFDS`` in ``_native_stacks.c``: workers sampled at
#: most, and those whose running state is read from a descriptor of their own.
SAMPLER_SLOTS = 65536
SAMPLER_STATFDS = 64


class _Worker:
    __slots__ = ("coro", "ident", "probe", "statfd", "tracker")

    def __init__(self, tracker: StateTracker, probe: int, coro: Any, statfd: bool) -> None:
        self.tracker, self.probe, self.coro = tracker, probe, coro
        self.ident = threading.get_ident()
        self.statfd = -1
        if statfd:
            with contextlib.suppress(OSError):
                path = f"/proc/self/task/{threading.get_native_id()}/stat"
                self.statfd = os.open(path, os.O_RDONLY)

    def close(self) -> None:
        if self.statfd >= 0:
            os.close(self.statfd)
            self.statfd = -1


def _running(fd: int) -> bool:
    if fd < 0:
        return True
    try:
        text = os.pread(fd, 512, 0)
    except OSError:
        return True
    at = text.rfind(b")")
    return not (at >= 0 and text[at + 1 : at + 2] == b" " and text[at + 2 : at + 3] != b"R")


class StackSampler:
    """See ``_native.StackSampler``."""

    def __init__(self, ring: Ring | Any, table: str, period_ns: int = 10_000_000) -> None:
        if not hasattr(ring, "record"):
            raise TypeError("ring must be a Ring")
        if period_ns <= 0:
            raise ValueError("period_ns must be positive")
        self._ring = ring
        self._table = open(table, "a", encoding="utf-8")  # noqa: SIM115 - closed by stop
        self._base = int(period_ns)
        self._shift = 0
        self._passes = 0
        self._workers: dict[int, _Worker] = {}
        self._ids: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self.samples = 0
        self.cpu_ns = 0
        self._wall = 0

    @property
    def stacks(self) -> int:
        return len(self._ids)

    @property
    def period_ns(self) -> int:
        return self._base << self._shift

    def add(self, tracker: StateTracker, probe: int, coro: Any = None) -> bool:
        with self._lock:
            old = self._workers.get(id(tracker))
            if old is None and len(self._workers) >= SAMPLER_SLOTS:
                return False
            held = sum(w.statfd >= 0 for w in self._workers.values() if w is not old)
            w = _Worker(tracker, int(probe), coro, held < SAMPLER_STATFDS)
            self._workers[id(tracker)] = w
        if old is not None:
            old.close()
        return True

    def remove(self, tracker: StateTracker) -> bool:
        with self._lock:
            w = self._workers.pop(id(tracker), None)
        if w is not None:
            w.close()
        return w is not None

    def start(self) -> None:
        if self._pid != os.getpid():
            raise RuntimeError("this stack sampler is not this process's")
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._main, name="streamscope-stacks", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None and self._pid == os.getpid():
            self._stop.set()
            self._thread.join()
            self._write(f"#cost\t{self.cpu_ns}\t{self.samples}\t{self._wall}\n")
        self._thread = None

    def _main(self) -> None:
        # no priority of its own: it needs the interpreter's lock to sample at all
        self._write("#priority\tnormal\n")
        t0, c0 = time.monotonic_ns(), time.thread_time_ns()
        nxt, last, c_last, w_last = t0, t0, 0, 0
        draw = random.Random(t0)
        while True:
            nxt += int(draw.expovariate(1.0) * self.period_ns)  # Poisson: see _native_stacks.c
            now = time.monotonic_ns()
            if self._stop.wait(max(nxt - now, 0) / 1e9):
                break
            now = time.monotonic_ns()
            if now - nxt > self.period_ns:
                nxt = now
            self._sample()
            self.cpu_ns = time.thread_time_ns() - c0
            wall = self._wall = time.monotonic_ns() - t0
            if now - last >= 1_000_000_000:
                share = (self.cpu_ns - c_last) / (wall - w_last + 1)
                c_last, w_last, last = self.cpu_ns, wall, now
                budget = min(COST_BUDGET * 1e7 / self._base, 0.25)  # see _native_stacks.c
                if share > budget and self._shift < PERIOD_MAX_SHIFT:
                    self._shift += 1
                elif share < budget / 4 and self._shift > 0:
                    self._shift -= 1
                self._write(f"#cost\t{self.cpu_ns}\t{self.samples}\t{wall}\n")

    def _sample(self) -> None:
        with self._lock:
            workers = list(self._workers.values())
        # Each worker's state first, then the stacks, as the native sampler reads them: the
        # stacks read first were a pass's stale ones where the interpreter switched threads
        # between (a worker found busy with the stack of its call before it turned busy).
        states = [w.tracker.state for w in workers]
        frames = sys._current_frames()
        rest = 0  # workers at rest: sampled one pass in 2**rest (see _native_stacks.c)
        while rest < REST_MAX_SHIFT and len(workers) >> rest > SAMPLER_RESTING:
            rest += 1
        turn, this = (1 << rest) - 1, self._passes
        self._passes += 1
        for i, (w, st) in enumerate(zip(workers, states, strict=True)):
            klass = _SAMPLED.get(int(st), SampledState.IDLE)
            sid = 0
            shift = self._shift
            if klass != SampledState.RUNNING:
                if (this + i) & turn:
                    continue
                shift += rest
            else:
                stack = _stack(frames.get(w.ident), w.coro)
                if stack is None or not _running(w.statfd):
                    klass = SampledState.WAITING
                if stack:
                    sid = self._id(stack)
            value = (w.probe << 32) | (shift << 28) | (int(klass) << 24) | (sid & 0xFFFFFF)
            self._ring.record(value)
            self.samples += 1

    def _id(self, stack: list[FrameType]) -> int:
        key = tuple((f.f_code.co_qualname, f.f_code.co_filename, f.f_code.co_firstlineno)
                    for f in stack)  # fmt: skip
        sid = self._ids.get(key)
        if sid is None:
            if len(self._ids) >= STACK_TABLE * 3 // 4:
                return 0
            sid = self._ids[key] = len(self._ids) + 1
            parts = [str(sid), str(len(key))]
            for name, file, line in reversed(key):
                parts += [_clean(name), _clean(file), str(line)]
            self._write("\t".join(parts) + "\n")
        return sid

    def _write(self, line: str) -> None:
        try:
            self._table.write(line)
            self._table.flush()
        except (OSError, ValueError):
            pass  # a table that cannot be written: the samples still count, unnamed

    def __del__(self) -> None:
        self.stop()
        if hasattr(self, "_table"):
            self._table.close()


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ").replace("\r", " ")


def _stack(top: FrameType | None, coro: Any) -> list[FrameType] | None:
    """The frames from ``top`` back (leaf first), at most ``STACK_DEPTH``; for a task's
    coroutine, only down to its frame (None when it is not running there)."""
    out: list[FrameType] = []
    root = getattr(coro, "cr_frame", None) if coro is not None else None
    f = top
    while f is not None and len(out) < STACK_DEPTH:
        out.append(f)
        if root is not None and f is root:
            return out
        f = f.f_back
    return None if coro is not None else out
