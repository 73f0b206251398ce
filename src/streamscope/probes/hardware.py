"""Hardware-style monitor probes: triggers, counters, interval timers, samplers, global trigger.

The semantics of the integrated monitor probe (DeVille, Troxel & George, Performance Monitoring
for Run-time Management of Reconfigurable Devices, 2005, §3.2), in pure Python and exact:

* a :class:`Condition` compares a masked value, ``(x & mask) OP value``;
* a :class:`Trigger` of depth *d* is a sequence of *d* conditions that must match in order; when
  the last one matches it fires its actions and starts again at level 0;
* a :class:`Counter` is a wrapping register of ``width`` bits whose wrap-arounds are counted, so
  its exact total is never lost;
* an :class:`IntervalTimer` accumulates the ticks between a start and a stop event into such a
  counter;
* a :class:`Sampler` writes a captured value with its ticks into a :class:`RingTap`, on a
  trigger or once per period (:class:`Periodic`);
* a :class:`GlobalTrigger` makes every probe of a group snapshot at the same ticks.

Every record goes through a :class:`RingTap`, so each capture is either kept or counted as
dropped by the tap, never both. Not yet wired into queries.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from streamscope.core.records import Kind
from streamscope.probes.taps import RingTap

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Condition:
    """One trigger level: matches ``x`` when ``(x & mask) OP value``; ``mask=-1`` keeps all bits."""

    __slots__ = ("_cmp", "mask", "op", "value")

    def __init__(self, op: str, value: int, mask: int = -1) -> None:
        if op not in _OPS:
            raise ValueError(f"unknown comparison {op!r}; expected one of {sorted(_OPS)}")
        self.op = op
        self.value = value
        self.mask = mask
        self._cmp = _OPS[op]

    def matches(self, x: int) -> bool:
        return self._cmp(x & self.mask, self.value)

    def __repr__(self) -> str:
        return f"Condition({self.op!r}, {self.value}, mask={self.mask})"


_CONDITION_RE = re.compile(
    r"\s*(==|!=|<=|>=|<|>)\s*(-?(?:0[xX][0-9a-fA-F]+|\d+))\s*(?:&\s*(0[xX][0-9a-fA-F]+|\d+))?\s*"
)


def parse_condition(text: str, where: str = "trigger") -> Condition:
    """``"> 100"``, ``"== 0x4 & 0xf"`` (masked) → a :class:`Condition`; ValueError if malformed."""
    m = _CONDITION_RE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"{where}: bad trigger condition {text!r}: expected OP VALUE [& MASK] with OP one "
            "of ==, !=, <, <=, >, >= (e.g. '> 100' or '== 0x4 & 0xf')"
        )
    op, value, mask = m.groups()
    return Condition(op, int(value, 0), int(mask, 0) if mask else -1)


class Action(Protocol):
    """What a trigger runs when it fires: called with the firing value's ticks and value."""

    def __call__(self, ticks: int, value: int) -> None: ...


class Trigger:
    """A trigger of depth ``len(conditions)``: its conditions must match in order.

    At level ``i`` an observed value that matches ``conditions[i]`` advances to level ``i + 1``;
    matching the last condition fires the actions (in order) and returns to level 0. A value
    that does not match is ignored at the current level, unless ``reset_on_mismatch``: then the
    trigger returns to level 0 and the same value is tried against the first condition.
    """

    __slots__ = ("actions", "conditions", "fired", "level", "reset_on_mismatch")

    def __init__(
        self,
        conditions: Sequence[Condition],
        actions: Sequence[Action] = (),
        *,
        reset_on_mismatch: bool = False,
    ) -> None:
        if not conditions:
            raise ValueError("a trigger needs at least one condition")
        self.conditions = tuple(conditions)
        self.actions = tuple(actions)
        self.reset_on_mismatch = reset_on_mismatch
        self.level = 0
        self.fired = 0

    @property
    def depth(self) -> int:
        return len(self.conditions)

    def observe(self, ticks: int, value: int) -> bool:
        """Present one value; True when this value completed the sequence (and fired)."""
        level = self.level
        if self.conditions[level].matches(value):
            level += 1
        elif self.reset_on_mismatch and level:
            level = 1 if self.conditions[0].matches(value) else 0
        if level < len(self.conditions):
            self.level = level
            return False
        self.level = 0
        self.fired += 1
        for action in self.actions:
            action(ticks, value)
        return True

    def reset(self) -> None:
        self.level = 0


class Counter:
    """A ``width``-bit event counter: ``value`` wraps modulo ``2**width``, ``wraps`` counts it.

    ``total`` is the exact count, ``wraps * 2**width + value``. With a ``tap`` it can take part
    in a :class:`GlobalTrigger` (its snapshot is ``total``).
    """

    __slots__ = ("mask", "tap", "value", "width", "wraps")

    def __init__(self, width: int = 32, tap: RingTap | None = None) -> None:
        if width < 1:
            raise ValueError("counter width must be at least one bit")
        self.width = width
        self.mask = (1 << width) - 1
        self.value = 0
        self.wraps = 0
        self.tap = tap

    def increment(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError("a counter only counts up")
        v = self.value + n
        self.wraps += v >> self.width
        self.value = v & self.mask

    @property
    def total(self) -> int:
        return (self.wraps << self.width) + self.value

    def current(self) -> int:
        return self.total


class IntervalTimer:
    """A free-running timer: ticks between ``start`` and ``stop`` accumulate into a counter.

    The accumulator wraps at ``width`` bits (wraps counted, see :class:`Counter`). A stop with no
    start before it is ignored and counted in ``unmatched``; a start while already running
    re-arms the timer at the new ticks and is counted in ``restarts``.
    """

    __slots__ = ("acc", "intervals", "restarts", "started_at", "tap", "unmatched")

    def __init__(self, width: int = 32, tap: RingTap | None = None) -> None:
        self.acc = Counter(width)
        self.intervals = 0
        self.unmatched = 0
        self.restarts = 0
        self.started_at: int | None = None
        self.tap = tap

    @property
    def running(self) -> bool:
        return self.started_at is not None

    def start(self, ticks: int) -> None:
        if self.started_at is not None:
            self.restarts += 1
        self.started_at = ticks

    def stop(self, ticks: int) -> None:
        started = self.started_at
        if started is None:
            self.unmatched += 1
            return
        if ticks < started:
            raise ValueError(f"timer stopped at {ticks}, before its start at {started}")
        self.acc.increment(ticks - started)
        self.intervals += 1
        self.started_at = None

    @property
    def value(self) -> int:
        """The accumulator register (wrapped)."""
        return self.acc.value

    @property
    def wraps(self) -> int:
        return self.acc.wraps

    @property
    def total(self) -> int:
        """Exact accumulated ticks over all completed intervals."""
        return self.acc.total

    def current(self) -> int:
        return self.total


class Sampler:
    """Captures a value with its ticks into a :data:`Kind.SAMPLE` tap.

    ``held`` is the hold register: the last value presented to :meth:`hold` or captured. A
    global snapshot captures it.
    """

    __slots__ = ("captures", "held", "tap")

    def __init__(self, tap: RingTap) -> None:
        if tap.kind != Kind.SAMPLE:
            raise ValueError("a sampler writes into a Kind.SAMPLE tap")
        self.tap = tap
        self.held = 0
        self.captures = 0

    def hold(self, value: int) -> None:
        self.held = value

    def on_trigger(self, ticks: int, value: int | None = None) -> None:
        """Capture ``value`` (or the held value) at ``ticks``; kept or counted dropped by the tap."""
        if value is not None:
            self.held = value
        self.captures += 1
        self.tap.record(ticks, self.held)

    def current(self) -> int:
        return self.held


class Periodic:
    """Drives a sampler once per ``period_ticks``, due at ``start_ticks + k * period_ticks``.

    ``tick(now, value)`` captures once when at least one period boundary has passed since the
    last capture; when several have passed it still captures once (at ``now``), and counts the
    skipped boundaries in ``missed``.
    """

    __slots__ = ("captures", "missed", "next_due", "period", "sampler")

    def __init__(self, sampler: Sampler, period_ticks: int, start_ticks: int = 0) -> None:
        if period_ticks <= 0:
            raise ValueError("period must be positive")
        self.sampler = sampler
        self.period = period_ticks
        self.next_due = start_ticks + period_ticks
        self.captures = 0
        self.missed = 0

    def tick(self, now_ticks: int, value: int) -> bool:
        """True when this call captured."""
        self.sampler.hold(value)
        if now_ticks < self.next_due:
            return False
        elapsed = (now_ticks - self.next_due) // self.period + 1
        self.next_due += elapsed * self.period
        self.missed += elapsed - 1
        self.captures += 1
        self.sampler.on_trigger(now_ticks, value)
        return True


class Snapshottable(Protocol):
    """A probe that can join a global trigger: a tap and a current value."""

    @property
    def tap(self) -> RingTap | None: ...

    def current(self) -> int: ...


class GlobalTrigger:
    """Makes every probe of a group capture its current value into its tap at the same ticks.

    A counter captures its total, a timer its accumulated ticks, a sampler its held value. Also
    usable as a trigger action.
    """

    __slots__ = ("fires", "group")

    def __init__(self, group: Sequence[Snapshottable]) -> None:
        for member in group:
            if member.tap is None:
                raise ValueError(f"{member!r} has no tap to snapshot into")
        self.group = tuple(group)
        self.fires = 0

    def fire(self, ticks: int) -> None:
        self.fires += 1
        for member in self.group:
            tap = member.tap
            assert tap is not None
            tap.record(ticks, member.current())

    def __call__(self, ticks: int, value: int) -> None:
        self.fire(ticks)


class CountAction:
    """Increments a counter by one per firing."""

    __slots__ = ("counter",)

    def __init__(self, counter: Counter) -> None:
        self.counter = counter

    def __call__(self, ticks: int, value: int) -> None:
        self.counter.increment()


class SampleAction:
    """Captures ``value_from(value)`` (the firing value by default) with a sampler."""

    __slots__ = ("sampler", "value_from")

    def __init__(self, sampler: Sampler, value_from: Callable[[int], int] | None = None) -> None:
        self.sampler = sampler
        self.value_from = value_from

    def __call__(self, ticks: int, value: int) -> None:
        v = value if self.value_from is None else self.value_from(value)
        self.sampler.on_trigger(ticks, v)


class StartTimer:
    __slots__ = ("timer",)

    def __init__(self, timer: IntervalTimer) -> None:
        self.timer = timer

    def __call__(self, ticks: int, value: int) -> None:
        self.timer.start(ticks)


class StopTimer:
    __slots__ = ("timer",)

    def __init__(self, timer: IntervalTimer) -> None:
        self.timer = timer

    def __call__(self, ticks: int, value: int) -> None:
        self.timer.stop(ticks)


class TraceAction:
    """Records a trace event (ticks, firing value) into a tap of the given kind (SAMPLE default).

    A tap's records all have the tap's kind, so ``kind`` must be the tap's.
    """

    __slots__ = ("tap",)

    def __init__(self, tap: RingTap, kind: Kind = Kind.SAMPLE) -> None:
        if tap.kind != int(kind):
            raise ValueError(f"trace kind {kind.name} does not match the tap's kind {tap.kind}")
        self.tap = tap

    def __call__(self, ticks: int, value: int) -> None:
        self.tap.record(ticks, value)
