"""The pure-Python twin of the native probe core (``_native.c``): the same classes and functions.

In: the same calls. Out: the same records, refusals and counts in the same ring layout, so that a
ring written by either is drained alike. Used where no compiler built the native core (or with
``STREAMSCOPE_PURE_PYTHON=1``); the tests run both side by side on the same inputs. It is several
times slower per event; it is never the reason a figure differs.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from typing import Any

from streamscope.core.rings import (
    HEADER_BYTES,
    MAGIC,
    RECORD_BYTES,
    SAMPLE_EVERY,
    W_CAPACITY,
    W_COST_N,
    W_COST_NS,
    W_DROPPED,
    W_KIND,
    W_LAST,
    W_MAGIC,
    W_PROBE,
    W_R,
    W_REFUSED,
    W_TOTAL,
    W_W,
)

_KIND_ENTER, _KIND_EXIT = 7, 8
_BUSY, _BLOCKED_IN, _BLOCKED_OUT = 1, 2, 3
#: See ``HEARTBEAT_NS`` in ``_native.c``: a busy stage restates BUSY at most this often (ns).
HEARTBEAT_NS = 100_000_000
_MASK = SAMPLE_EVERY - 1
_monotonic_ns = time.monotonic_ns
_floor = math.floor

_fork_gen = [0]
os.register_at_fork(after_in_child=lambda: _fork_gen.__setitem__(0, _fork_gen[0] + 1))


def host_ns() -> int:
    return _monotonic_ns()


def _measure_gap() -> int:
    gaps = []
    for _ in range(257):
        a = _monotonic_ns()
        gaps.append(_monotonic_ns() - a)
    return sorted(gaps)[128]


_gap = _measure_gap()


def clock_gap_ns() -> int:
    return _gap


class Clock:
    """See ``_native.Clock``."""

    __slots__ = (
        "_c0", "_c1", "_c2", "_epoch", "_kind", "_manual", "_rate_at", "_rate_step", "_step",
        "_step_at", "_tick",
    )  # fmt: skip

    def __init__(
        self,
        kind: str = "host",
        *,
        epoch_ns: int = 0,
        c0: float = 0.0,
        c1: float = 1.0,
        c2: float = 0.0,
        step_at: float = math.inf,
        step: float = 0.0,
        tick_ns: float = 1.0,
        start: int = 0,
        rate_at: float = math.inf,
        rate_step: float = 0.0,
    ) -> None:
        if kind not in ("host", "emulated", "manual"):
            raise ValueError(f"clock kind must be host, emulated or manual, not {kind!r}")
        if not tick_ns > 0:
            raise ValueError("tick_ns must be > 0")
        self._kind = kind
        self._epoch = int(epoch_ns)
        self._c0, self._c1, self._c2 = float(c0), float(c1), float(c2)
        self._step_at, self._step, self._tick = float(step_at), float(step), float(tick_ns)
        self._manual = int(start)
        self._rate_at, self._rate_step = float(rate_at), float(rate_step)

    def _emulated(self, host: int) -> int:
        tau = (host - self._epoch) * 1.0
        d = self._c0 + tau * (self._c1 + tau * self._c2)
        if tau >= self._step_at:
            d += self._step
        if tau >= self._rate_at:
            d += (tau - self._rate_at) * self._rate_step
        return _floor(d / self._tick)

    def now(self) -> int:
        if self._kind == "host":
            return _monotonic_ns()
        if self._kind == "emulated":
            return self._emulated(_monotonic_ns())
        return self._manual

    def ticks_at(self, host: int) -> int:
        if self._kind == "host":
            return int(host)
        if self._kind == "emulated":
            return self._emulated(int(host))
        return self._manual

    def set(self, ticks: int) -> None:
        if self._kind != "manual":
            raise ValueError("only a manual clock can be set")
        if ticks < self._manual:
            raise ValueError("a clock never goes backwards")
        self._manual = int(ticks)

    def advance(self, ticks: int) -> int:
        if self._kind != "manual":
            raise ValueError("only a manual clock can be advanced")
        if ticks < 0:
            raise ValueError("a clock never goes backwards")
        self._manual += int(ticks)
        return self._manual

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def tick_ns(self) -> float:
        return self._tick


class Ring:
    """See ``_native.Ring``: one writer; words of the header are read and written in place."""

    __slots__ = (
        "_calls",
        "_cap",
        "_depth",
        "_gen",
        "_h",
        "_mask",
        "_r_cache",
        "_s",
        "clock",
        "kind",
        "probe",
    )

    def __init__(self, buffer: Any, clock: Clock) -> None:
        if not isinstance(clock, Clock):
            raise TypeError("clock must be a Clock of the same implementation")
        view = memoryview(buffer).cast("B")
        if view.readonly:
            raise TypeError("a ring needs a writable buffer")
        if len(view) < HEADER_BYTES:
            raise ValueError("a ring needs a buffer of at least its 256-byte header")
        h = view[:HEADER_BYTES].cast("q")
        if h[W_MAGIC] & 0xFFFFFFFF != MAGIC:
            raise ValueError(
                "not a streamscope ring (bad magic): make it with streamscope.core.rings"
            )
        cap = h[W_CAPACITY]
        if cap < 0 or cap & (cap - 1) or len(view) < HEADER_BYTES + cap * RECORD_BYTES:
            raise ValueError(
                "ring capacity is not a power of two, or the buffer is too small for it"
            )
        self._h = h
        self._s = view[HEADER_BYTES : HEADER_BYTES + cap * RECORD_BYTES].cast("q")
        self._cap = cap
        self._mask = cap - 1 if cap else 0
        self._r_cache = h[W_R]
        self.probe = h[W_PROBE]
        self.kind = h[W_KIND]
        self.clock = clock
        self._gen = _fork_gen[0]
        self._depth = 0
        self._calls: list[int] = []

    def _room(self, w: int, need: int) -> bool:
        if self._cap - (w - self._r_cache) >= need:
            return True
        self._r_cache = self._h[W_R]
        return self._cap - (w - self._r_cache) >= need

    def _store(self, kind: int, probe: int, ticks: int, value: int) -> bool:
        h = self._h
        w = h[W_W]
        if not self._room(w, 1):
            h[W_DROPPED] += 1
            h[W_REFUSED] = value
            return False
        i = (w & self._mask) * 3
        s = self._s
        s[i] = kind | ((probe - (1 << 32) if probe >= 1 << 31 else probe) << 32)
        s[i + 1] = ticks
        s[i + 2] = value
        h[W_W] = w + 1
        return True

    def _sampled(self) -> bool:
        h = self._h
        return not (h[W_W] + h[W_DROPPED]) & _MASK

    def _cost(self, t0: int) -> None:
        h = self._h
        h[W_COST_NS] += max(_monotonic_ns() - t0 - _gap, 0)
        h[W_COST_N] += 1

    def _refused(self, value: int) -> bool:
        if self._room(self._h[W_W], 1):
            return False
        self._h[W_DROPPED] += 1
        self._h[W_REFUSED] = value
        return True

    def record(self, value: int) -> bool:
        if self._gen != _fork_gen[0]:
            return False
        if not self._sampled():
            if self._refused(value):
                return False
            return self._store(self.kind, self.probe, self.clock.now(), value)
        t0 = _monotonic_ns()
        ok = not self._refused(value) and self._store(
            self.kind, self.probe, self.clock.now(), value
        )
        self._cost(t0)
        return ok

    def record_at(self, ticks: int, value: int) -> bool:
        if self._gen != _fork_gen[0]:
            return False
        if not self._sampled():
            return self._store(self.kind, self.probe, ticks, value)
        t0 = _monotonic_ns()
        ok = self._store(self.kind, self.probe, ticks, value)
        self._cost(t0)
        return ok

    def write(self, kind: int, probe: int, ticks: int, value: int) -> bool:
        if not (0 <= kind <= 0xFFFFFFFF and 0 <= probe <= 0xFFFFFFFF):
            raise OverflowError("kind and probe are 32-bit unsigned")
        if self._gen != _fork_gen[0]:
            return False
        return self._store(kind, probe, ticks, value)

    def free(self) -> int:
        w = self._h[W_W]
        self._room(w, self._cap or 1)
        return self._cap - (w - self._r_cache)

    def refuse(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError("refusals only count up")
        if self._gen == _fork_gen[0]:
            self._h[W_DROPPED] += n

    def add(self, n: int) -> None:
        if self._gen == _fork_gen[0]:
            self._h[W_LAST] = self.clock.now()
            self._h[W_TOTAL] += n

    def enter(self, fid: int) -> bool:
        if fid <= 0:
            raise ValueError("function ids start at 1")
        calls = self._calls
        if fid >= len(calls):
            n = len(calls) or 64
            while n <= fid:
                n *= 2
            calls.extend([0] * (n - len(calls)))
        calls[fid] += 1
        if self._gen != _fork_gen[0]:
            return False
        sampled = self._sampled()
        t0 = _monotonic_ns() if sampled else 0
        ok = self._room(self._h[W_W], self._depth + 2)
        if ok:
            self._store(_KIND_ENTER, self.probe, self.clock.now(), fid)
            self._depth += 1
        else:
            self._h[W_DROPPED] += 2
        if sampled:
            self._cost(t0)
        return ok

    def exit(self, fid: int) -> None:
        if self._gen != _fork_gen[0]:
            return
        sampled = self._sampled()
        t0 = _monotonic_ns() if sampled else 0
        self._store(_KIND_EXIT, self.probe, self.clock.now(), fid)
        if self._depth > 0:
            self._depth -= 1
        if sampled:
            self._cost(t0)

    def calls(self) -> list[int]:
        return list(self._calls)

    @property
    def written(self) -> int:
        return int(self._h[W_W])

    @property
    def dropped(self) -> int:
        return int(self._h[W_DROPPED])

    @property
    def read(self) -> int:
        return int(self._h[W_R])

    @property
    def total(self) -> int:
        return int(self._h[W_TOTAL])

    @property
    def refused(self) -> int:
        return int(self._h[W_REFUSED])

    @property
    def last(self) -> int:
        return int(self._h[W_LAST])

    @property
    def cost_ns(self) -> int:
        return int(self._h[W_COST_NS])

    @property
    def cost_n(self) -> int:
        return int(self._h[W_COST_N])

    @property
    def capacity(self) -> int:
        return int(self._cap)

    @property
    def depth(self) -> int:
        return self._depth


class StateTracker:
    """See ``_native.StateTracker``."""

    __slots__ = ("beat_ns", "name", "ring", "state")

    def __init__(self, name: str, ring: Ring | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        if ring is not None and not isinstance(ring, Ring):
            raise TypeError("ring must be a Ring or None")
        self.name = name
        self.ring = ring
        self.state = 0
        self.beat_ns = 0

    def heartbeat(self) -> None:
        """See ``_native.StateTracker.heartbeat``."""
        ring = self.ring
        if ring is None or self.state != _BUSY:
            return
        now = time.monotonic_ns()
        if now - self.beat_ns >= HEARTBEAT_NS:
            self.beat_ns = now
            ring.record(_BUSY)

    def set(self, state: int) -> int:
        prev = self.state
        if state != prev:
            self.state = state
            ring = self.ring
            if ring is not None:
                ring.record(state)
        return prev


_local = threading.local()


def bind_tracker(tracker: StateTracker | None) -> StateTracker | None:
    if tracker is not None and not isinstance(tracker, StateTracker):
        raise TypeError("bind_tracker(StateTracker or None)")
    old: StateTracker | None = getattr(_local, "tracker", None)
    _local.tracker = tracker
    return old


def bound_tracker() -> StateTracker | None:
    return getattr(_local, "tracker", None)


_config: dict[str, Any] = {}


def configure(*, eos: Any, aborted: Any, full: Any, empty: Any, main_ident: int) -> None:
    _config.update(eos=eos, aborted=aborted, full=full, empty=empty, main=main_ident)


def load_acquire(buffer: Any, word: int) -> int:
    return int(memoryview(buffer).cast("B")[: (word + 1) * 8].cast("q")[word])


def store_release(buffer: Any, word: int, value: int) -> None:
    memoryview(buffer).cast("B")[: (word + 1) * 8].cast("q")[word] = value


class Fifo:
    """See ``_native.Fifo``: ``queue.Queue``'s algorithm with the native FIFO's extras."""

    def __init__(self, maxsize: int = 0) -> None:
        self._maxsize = maxsize if maxsize > 0 else 0
        self._q: deque[Any] = deque()
        self._mutex = threading.Lock()
        self._not_empty = threading.Condition(self._mutex)
        self._not_full = threading.Condition(self._mutex)
        self._all_done = threading.Condition(self._mutex)
        self._unfinished = 0
        self._n_in = 0
        self._n_out = 0
        self._aborted = False
        self._watch = False
        self._last_put = 0
        self._truth_at = 0
        self._truth: list[int] = []
        self.tail: Ring | None = None
        self.head: Ring | None = None

    def _full(self) -> bool:
        return 0 < self._maxsize <= len(self._q)

    def _aborted_error(self) -> BaseException:
        exc: type[BaseException] = _config.get("aborted", RuntimeError)
        return exc(getattr(self, "name", "channel"))

    def _push(self, item: Any) -> None:
        self._q.append(item)
        self._unfinished += 1
        if item is not _config.get("eos"):
            self._n_in += 1
            tap = self.tail
            if tap is not None:
                tap.record(self._n_in)
            if self._truth_at == 1:
                self._truth.append(_monotonic_ns())
        if self._watch:
            self._last_put = _monotonic_ns()
        self._not_empty.notify()

    def _pop(self) -> Any:
        item = self._q.popleft()
        if item is not _config.get("eos"):
            self._n_out += 1
            tap = self.head
            if tap is not None:
                tap.record(self._n_out)
            if self._truth_at == 2:
                self._truth.append(_monotonic_ns())
        self._not_full.notify()
        return item

    @staticmethod
    def _deadline(block: bool, timeout: float | None) -> float | None:
        if not block or timeout is None:
            return None
        if timeout < 0 or math.isnan(timeout):
            raise ValueError("'timeout' must be a non-negative number")
        return time.monotonic() + timeout

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        deadline = self._deadline(block, timeout)
        with self._not_full:
            if self._aborted:
                raise self._aborted_error()
            if not self._full():
                self._push(item)
                tr = bound_tracker()
                if tr is not None:
                    tr.heartbeat()
                return
            if not block:
                raise _config["full"]
            tr = bound_tracker()
            prev = tr.set(_BLOCKED_OUT) if tr is not None else 0
            try:
                while self._full() and not self._aborted:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise _config["full"]
                    self._not_full.wait(left)
                if self._aborted:
                    raise self._aborted_error()
                self._push(item)
            finally:
                if tr is not None:
                    tr.set(prev)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        deadline = self._deadline(block, timeout)
        with self._not_empty:
            if self._aborted:
                raise self._aborted_error()
            if self._q:
                tr = bound_tracker()
                if tr is not None:
                    tr.heartbeat()
                return self._pop()
            if not block:
                raise _config["empty"]
            tr = bound_tracker()
            prev = tr.set(_BLOCKED_IN) if tr is not None else 0
            try:
                while not self._q and not self._aborted:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise _config["empty"]
                    self._not_empty.wait(left)
                if self._aborted:
                    raise self._aborted_error()
                return self._pop()
            finally:
                if tr is not None:
                    tr.set(prev)

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get_nowait(self) -> Any:
        return self.get(False)

    def qsize(self) -> int:
        return len(self._q)

    def empty(self) -> bool:
        return not self._q

    def full(self) -> bool:
        return self._full()

    def task_done(self) -> None:
        with self._all_done:
            if self._unfinished <= 0:
                raise ValueError("task_done() called too many times")
            self._unfinished -= 1
            if self._unfinished == 0:
                self._all_done.notify_all()

    def join(self) -> None:
        with self._all_done:
            while self._unfinished:
                self._all_done.wait()

    def wait_batch(self, bulk: int, timeout_s: float) -> int:
        if bulk < 1:
            raise ValueError("bulk must be at least 1")
        eos = _config.get("eos")
        with self._not_empty:
            while True:
                if self._aborted:
                    raise self._aborted_error()
                n = len(self._q)
                for i in range(min(n, bulk)):
                    if self._q[i] is eos:
                        return i + 1
                if n >= bulk:
                    return bulk
                left = None
                if n and not math.isinf(timeout_s):
                    left = (self._last_put + timeout_s * 1e9 - _monotonic_ns()) / 1e9
                    if left <= 0:
                        return n
                self._not_empty.wait(left)

    def take(self, n: int) -> list[Any]:
        with self._mutex:
            if self._aborted:
                raise self._aborted_error()
            if n > len(self._q):
                raise ValueError(f"take({n}): only {len(self._q)} items wait")
            return [self._pop() for _ in range(n)]

    def abort(self) -> None:
        with self._mutex:
            self._aborted = True
            self._q.clear()
            self._maxsize = 0
            self._not_empty.notify_all()
            self._not_full.notify_all()
            self._all_done.notify_all()

    def keep_truth(self, at: str) -> None:
        if at not in ("put", "get"):
            raise ValueError("keep_truth('put' or 'get')")
        with self._mutex:
            self._truth_at = 1 if at == "put" else 2

    def truth(self) -> bytes:
        import array

        with self._mutex:
            return array.array("q", self._truth).tobytes()

    def watch_idle(self) -> None:
        with self._mutex:
            self._watch = True
            self._last_put = _monotonic_ns()

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @property
    def items_in(self) -> int:
        return self._n_in

    @property
    def items_out(self) -> int:
        return self._n_out

    @property
    def unfinished_tasks(self) -> int:
        return self._unfinished

    @property
    def last_put_ns(self) -> int:
        return self._last_put

    @property
    def aborted(self) -> bool:
        return self._aborted
