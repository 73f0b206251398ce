"""The twin's bounded FIFO (see ``_native.Fifo``): ``queue.Queue``'s algorithm with its extras.

In: items put and got by stage threads; ``configure`` names the end-of-stream marker and the
errors to raise. Out: the items in order, a PUT/GET record per item into the channel's tail and
head rings, the waiting thread's stage shown blocked, and the true insertion or removal times
where asked.
"""

from __future__ import annotations

import array
import math
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamscope.core._twin_ring import Ring
from streamscope.core._twin_state import bound_tracker
from streamscope.core.records import State

_BLOCKED_IN, _BLOCKED_OUT = int(State.BLOCKED_IN), int(State.BLOCKED_OUT)
_monotonic_ns = time.monotonic_ns

#: What the pipeline layer gave the core once per process (``configure``): its end-of-stream
#: marker and exceptions, as the C core keeps them in module state.
_config: dict[str, Any] = {}


#: The tag a stage thread carries from what it took to what it puts (see ``Fifo.keep_tags``):
#: process-wide as the native core's thread-local is, one value per thread of the process.
_local = threading.local()
_MASK64 = (1 << 64) - 1
_SEQ_MASK = (1 << 40) - 1
#: The sampler's window: this many min_gap_ticks, and as many tags at most in it.
TAG_WINDOW = 64


def current_tag() -> int:
    """The calling thread's path tag: what its next put carries (0: none)."""
    return getattr(_local, "tag", 0)


def set_current_tag(tag: int) -> None:
    """Set the calling thread's path tag (a channel written in Python hands one over)."""
    _local.tag = operator.index(tag)
    _local.emitted = False


def emit_tag() -> int:
    """The tag an item put now carries (the thread's); the thread has put since it last took
    (a channel written in Python puts, as a FIFO's put does)."""
    _local.emitted = True
    return int(getattr(_local, "tag", 0))


def take_tag(tag: int) -> None:
    """An item with ``tag`` was taken (a channel written in Python, as a FIFO's take): the
    thread's tag after its last put is dropped; a thread with none takes this one."""
    if getattr(_local, "emitted", False):
        _local.tag = 0
        _local.emitted = False
    if getattr(_local, "tag", 0) == 0:
        _local.tag = operator.index(tag)


def configure(*, eos: Any, aborted: Any, full: Any, empty: Any, main_ident: int) -> None:
    """The end-of-stream marker, and the errors for an aborted channel, a full and an empty one."""
    _config.update(eos=eos, aborted=aborted, full=full, empty=empty, main=main_ident)


def _heartbeat() -> None:
    tracker = bound_tracker()
    if tracker is not None:
        tracker.heartbeat()


@contextmanager
def _blocked(state: int) -> Iterator[None]:
    """The calling thread's stage shown in ``state`` while it waits, then as it was."""
    tracker = bound_tracker()
    prev = tracker.set(state) if tracker is not None else 0
    try:
        yield
    finally:
        if tracker is not None:
            tracker.set(prev)


class TagSampler:
    """A path's origin: which items put there get a new tag (one in about ``every``, jittered,
    ``every`` adapted window by window so that tags stay ``min_gap`` ticks apart on average),
    and each tag leaving recorded (DEPART) into ``ring``. As the native core's; also what a
    channel written in Python (between processes) samples with."""

    def __init__(self, ring: Ring, every: int, min_gap_ticks: int = 0, seed: int = 1) -> None:
        if every < 1 or min_gap_ticks < 0:
            raise ValueError("tag_departures: every >= 1 and min_gap_ticks >= 0")
        self.ring = ring
        self.every = self._base = every
        self._min_gap = min_gap_ticks
        self._rng = seed or 1
        self._seq = 0
        self._window_start = self._window_tags = 0
        self._countdown = every // 2 + 1 + self._jitter() % every

    def _jitter(self) -> int:
        x = self._rng  # xorshift64, as the native core's
        x ^= (x << 13) & _MASK64
        x ^= x >> 7
        x ^= (x << 17) & _MASK64
        self._rng = x
        return x

    def choose(self) -> int:
        """A new tag for the item being put, or 0 (this one is not sampled)."""
        self._countdown -= 1
        if self._countdown > 0:
            return 0
        every = self.every
        self._countdown = every // 2 + 1 + self._jitter() % every
        self._seq += 1
        return int((self.ring.probe << 40) | (self._seq & _SEQ_MASK))

    def depart(self, tag: int, ticks: int | None) -> None:
        """A tag leaving, recorded at ``ticks`` (the tail tap's, of the same put) or now."""
        ring = self.ring
        if ticks is None:
            ticks = ring.record_stamp(tag)
        else:
            ring.record_at(ticks, tag)
        if self._min_gap > 0:  # window by window, as the native core
            self._window_tags += 1
            if ticks - self._window_start >= TAG_WINDOW * self._min_gap:
                n = self._window_tags
                while n > TAG_WINDOW and self.every < 1 << 40:
                    self.every *= 2
                    n //= 2
                if self._window_tags < TAG_WINDOW // 4 and self.every > self._base:
                    self.every //= 2
                self._window_start = ticks
                self._window_tags = 0


class Fifo:
    """See ``_native.Fifo``: ``queue.Queue``'s algorithm with the native FIFO's extras."""

    def __init__(self, maxsize: int = 0) -> None:
        self._maxsize = maxsize  # as queue.Queue keeps it: <= 0 is unbounded
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
        #: ``keep_stamps``: the tail tap's ticks of each waiting item (None: not kept).
        self._stamps: deque[int] | None = None
        self._last_stamp = 0
        #: ``keep_tags``: each waiting item's path tag (None: not kept), and the sampler of a
        #: path's origin (``tag_departures``).
        self._tags: deque[int] | None = None
        self._last_tag = 0
        self._sampler: TagSampler | None = None
        self._arrive: Ring | None = None
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
        stamp = tag = 0
        if item is not _config.get("eos"):
            self._n_in += 1
            if self._tags is not None:
                tag = self._tag_choose()
            departing = tag != 0 and self._sampler is not None
            tap = self.tail
            if tap is not None:
                if self._stamps is not None or departing:  # one clock read for all three
                    ticks = tap.record_stamp(self._n_in)
                    if self._stamps is not None:
                        stamp = ticks
                    if departing:
                        self._tag_depart(tag, ticks)
                else:
                    tap.record(self._n_in)
            elif departing:
                self._tag_depart(tag, None)
            if self._truth_at == 1:
                self._truth.append(_monotonic_ns())
        if self._stamps is not None:
            self._stamps.append(stamp)
        if self._tags is not None:
            self._tags.append(tag)
        if self._watch:
            self._last_put = _monotonic_ns()
        self._not_empty.notify()

    def _tag_choose(self) -> int:
        """The tag an item put here carries: the thread's, else, at a path's origin, a new one
        one item in about ``every``."""
        tag = emit_tag()
        if tag != 0 or self._sampler is None:
            return tag
        return self._sampler.choose()

    def _tag_depart(self, tag: int, ticks: int | None) -> None:
        assert self._sampler is not None
        self._sampler.depart(tag, ticks)

    def _tag_got(self, tag: int) -> None:
        take_tag(tag)

    def _pop(self) -> Any:
        item = self._q.popleft()
        if self._stamps is not None:
            self._last_stamp = self._stamps.popleft()
        if self._tags is not None:
            self._last_tag = self._tags.popleft()
        if item is not _config.get("eos"):
            self._n_out += 1
            tag = 0
            if self._tags is not None:
                tag = self._last_tag
                self._tag_got(tag)
            tap = self.head
            if tag != 0 and self._arrive is not None:  # a tagged item arriving
                if tap is not None:
                    self._arrive.record_at(tap.record_stamp(self._n_out), tag)
                else:
                    self._arrive.record(tag)
            elif tap is not None:
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

    def _wait(
        self,
        cond: threading.Condition,
        waiting: Callable[[], bool],
        deadline: float | None,
        timed_out: str,
    ) -> None:
        """Wait on ``cond`` while ``waiting()``: until then, an abort (raised), or the deadline
        (``_config[timed_out]`` raised). The caller holds the mutex."""
        while waiting() and not self._aborted:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise _config[timed_out]
            cond.wait(left)
        if self._aborted:
            raise self._aborted_error()

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        deadline = self._deadline(block, timeout)
        with self._not_full:
            if self._aborted:
                raise self._aborted_error()
            if not self._full():
                self._push(item)
                _heartbeat()
                return
            if not block:
                raise _config["full"]
            with _blocked(_BLOCKED_OUT):
                self._wait(self._not_full, self._full, deadline, "full")
                self._push(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        deadline = self._deadline(block, timeout)
        with self._not_empty:
            if self._aborted:
                raise self._aborted_error()
            if self._q:
                _heartbeat()
                return self._pop()
            if not block:
                raise _config["empty"]
            with _blocked(_BLOCKED_IN):
                self._wait(self._not_empty, self.empty, deadline, "empty")
                return self._pop()

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

    def _take_with(self, n: int, stamps: bool, tags: bool) -> tuple[list[Any], ...]:
        """``take(n)``, and what each item carried: its tail tap's ticks, its path tag, or
        both (the items, then each list asked for, stamps first)."""
        what = {(True, False): "take_stamped", (False, True): "take_tagged"}.get(
            (stamps, tags), "take_stamped_tagged"
        )
        with self._mutex:
            for wanted, kept, keep in ((stamps, self._stamps, "keep_stamps"),
                                       (tags, self._tags, "keep_tags")):  # fmt: skip
                if wanted and kept is None:
                    raise RuntimeError(f"{what}: {keep}() was not called")
            if self._aborted:
                raise self._aborted_error()
            if n > len(self._q):
                raise ValueError(f"{what}({n}): only {len(self._q)} items wait")
            items: list[Any] = []
            ticks: list[int] = []
            marks: list[int] = []
            for _ in range(n):
                items.append(self._pop())
                ticks.append(self._last_stamp)
                marks.append(self._last_tag)
            return (items, *([ticks] if stamps else []), *([marks] if tags else []))

    def take_stamped(self, n: int) -> tuple[list[Any], list[int]]:
        items, ticks = self._take_with(n, stamps=True, tags=False)
        return items, ticks

    def take_tagged(self, n: int) -> tuple[list[Any], list[int]]:
        items, marks = self._take_with(n, stamps=False, tags=True)
        return items, marks

    def take_stamped_tagged(self, n: int) -> tuple[list[Any], list[int], list[int]]:
        """``take(n)``: the items, their tail tap's ticks and their path tags."""
        items, ticks, marks = self._take_with(n, stamps=True, tags=True)
        return items, ticks, marks

    def keep_stamps(self) -> None:
        with self._mutex:
            if self._stamps is None:
                self._stamps = deque([0] * len(self._q))

    def keep_tags(self) -> None:
        """Carry each item's path tag with it (call before the first put)."""
        with self._mutex:
            if self._tags is None:
                self._tags = deque([0] * len(self._q))

    def _tags_kept(self, what: str) -> None:
        if self._tags is None:
            raise RuntimeError(f"{what}: keep_tags() was not called")

    def tag_departures(self, ring: Ring, every: int, min_gap_ticks: int = 0, seed: int = 1) -> None:
        """A path's origin: tag one item in about ``every`` (jittered; ``every`` doubles while
        tags come closer than ``min_gap_ticks``), record each tag leaving into ``ring``."""
        self._tags_kept("tag_departures")
        with self._mutex:
            self._sampler = TagSampler(ring, every, min_gap_ticks, seed)

    def tag_arrivals(self, ring: Ring) -> None:
        """Record each tagged item taken into ``ring`` (a path's end)."""
        self._tags_kept("tag_arrivals")
        with self._mutex:
            self._arrive = ring

    @property
    def last_tag(self) -> int:
        return self._last_tag

    @property
    def tag_every(self) -> int:
        return 0 if self._sampler is None else self._sampler.every

    def abort(self) -> None:
        with self._mutex:
            self._aborted = True
            self._q.clear()
            if self._stamps is not None:
                self._stamps.clear()
            if self._tags is not None:
                self._tags.clear()
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
        with self._mutex:
            return array.array("q", self._truth).tobytes()

    def watch_idle(self) -> None:
        with self._mutex:
            self._watch = True
            self._last_put = _monotonic_ns()

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        """As ``queue.Queue``'s: only later puts see it; a larger one lets waiting puts in."""
        with self._mutex:
            self._maxsize = operator.index(value)
            self._not_full.notify_all()

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
