"""Probes a user declares on a stage (``Pipeline.probe``) and reaches from the stage's code.

In: calls from the stage's own thread -- ``streamscope.probe("name").sample(v)``, ``.count()``,
``.start()``/``.stop()``. Out: fixed-shape records in the probe's ring (or its resource's probe
storage), drained by the monitor like every other ring.

``probe(name)`` finds the calling stage's probe; a probe that no query uses is inactive and
its handle does nothing, so instrumented code costs one method call when nobody asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from streamscope.core import forksafe
from streamscope.core.errors import PipelineError
from streamscope.probes.hardware import Trigger
from streamscope.probes.taps import RingTap

__all__ = [
    "CounterProbe",
    "GlobalProbe",
    "NullProbe",
    "SamplerProbe",
    "TimerProbe",
    "UserProbe",
    "current_stage",
    "probe",
    "register_stage",
    "set_current_stage",
]


class SamplePort(Protocol):
    """Where a sampler's samples go: a storage port (see ``probes.storage``)."""

    def offer(self, ticks: int, value: int, cycle: int | None = None) -> bool: ...


class UserProbe:
    """The face every probe handle shows; a method that does not fit the probe's kind says so."""

    kind = ""
    name = ""
    active = True

    def _wrong(self, method: str) -> PipelineError:
        fits = {
            "sampler": "sample(), hold() and observe()",
            "counter": "count() and observe()",
            "timer": "start(), stop() and lapse()",
            "global": "fire()",
        }
        return PipelineError(
            f"probe {self.name!r} is a {self.kind}: it has {fits.get(self.kind, '?')}, "
            f"not {method}()"
        )

    def sample(self, value: int, cycle: int | None = None) -> bool:
        raise self._wrong("sample")

    def hold(self, value: int) -> None:
        raise self._wrong("hold")

    def observe(self, value: int) -> bool:
        raise self._wrong("observe")

    def count(self, n: int = 1) -> None:
        raise self._wrong("count")

    def fire(self) -> None:
        raise self._wrong("fire")

    def start(self) -> None:
        raise self._wrong("start")

    def stop(self) -> None:
        raise self._wrong("stop")

    def lapse(self, length: int) -> None:
        raise self._wrong("lapse")


class NullProbe(UserProbe):
    """A declared probe that no query uses: every method does nothing."""

    active = False

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind

    def sample(self, value: int, cycle: int | None = None) -> bool:
        return False

    def hold(self, value: int) -> None:
        pass

    def observe(self, value: int) -> bool:
        return False

    def count(self, n: int = 1) -> None:
        pass

    def fire(self) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def lapse(self, length: int) -> None:
        pass


class SamplerProbe(UserProbe):
    """Captures values: each capture is one SAMPLE record, or one counted refusal.

    With a ``trigger`` a value is captured only when it completes the trigger's sequence of
    conditions; with ``period_ticks`` at most once per period (time-driven: the first value
    offered is captured, then the first one in each later period of the grid that starts
    there). ``held`` is the hold register: the last value offered, which a global trigger
    captures.
    """

    kind = "sampler"

    def __init__(
        self,
        name: str,
        port: SamplePort,
        now: Callable[[], int],
        trigger: Trigger | None = None,
        period_ticks: int = 0,
    ) -> None:
        self.name = name
        self._offer = port.offer
        self._now = now
        self.port = port
        self.trigger = trigger
        self.held = 0
        self.periodic = period_ticks > 0
        self.period = period_ticks
        self.next_due: int | None = None
        #: Period boundaries that passed without a sample() to capture at.
        self.missed = 0

    def sample(self, value: int, cycle: int | None = None) -> bool:
        """Offer ``value`` now (``cycle``: the hardware clock cycle, for centralised storage's
        arbiter). True when it was captured and stored, False otherwise (not due, trigger not
        fired, or storage refused it -- refusals are counted)."""
        value = int(value)
        self.held = value
        if self.trigger is None and not self.periodic:
            return self._offer(self._now(), value, cycle)
        t = self._now()
        if self.trigger is not None and not self.trigger.observe(t, value):
            return False
        if self.periodic:
            due = self.next_due
            if due is None:
                self.next_due = t + self.period  # the grid starts at the first capture
            elif t < due:
                return False
            else:
                passed = (t - due) // self.period + 1
                self.missed += passed - 1
                self.next_due = due + passed * self.period
        return self._offer(t, value, cycle)

    def observe(self, value: int) -> bool:
        return self.sample(value)

    def hold(self, value: int) -> None:
        """Set the hold register without capturing (a global trigger captures it)."""
        self.held = int(value)

    def capture_held(self, ticks: int) -> bool:
        return self._offer(ticks, self.held, None)


class CounterProbe(UserProbe):
    """Counts events: ``count(n)``, or with a trigger, ``observe(v)`` counts one each time the
    trigger fires. The count is a register in the probe's ring (``tap``: a ring of no records):
    counting is an addition and a clock read, and the monitor reads the register as it drains."""

    kind = "counter"

    def __init__(self, name: str, tap: RingTap, trigger: Trigger | None = None) -> None:
        self.name = name
        self.tap = tap
        self._add = tap.ring.add
        self.trigger = trigger

    def count(self, n: int = 1) -> None:
        """Add ``n`` (≥ 0) events."""
        if n < 0:
            raise PipelineError(f"counter {self.name!r} only counts up, not by {n}")
        self._add(n)

    def observe(self, value: int) -> bool:
        """Present ``value`` to the trigger; count one when it fires (always, without one)."""
        if self.trigger is not None and not self.trigger.observe(0, int(value)):
            return False
        self._add(1)
        return True

    @property
    def total(self) -> int:
        return int(self.tap.ring.total)


class GlobalProbe(UserProbe):
    """A global trigger: ``fire()`` makes every member sampler capture the value it holds, all
    at the same ticks (the snapshot of every probe at once of DeVille, Troxel & George,
    Performance Monitoring for Run-time Management of Reconfigurable Devices, 2005)."""

    kind = "global"

    def __init__(
        self, name: str, members: tuple[SamplerProbe, ...], now: Callable[[], int]
    ) -> None:
        self.name = name
        self.members = members
        self._now = now
        self.fires = 0

    def fire(self) -> None:
        t = self._now()
        self.fires += 1
        for m in self.members:
            m.capture_held(t)


class TimerProbe(UserProbe):
    """Intervals from ``start()`` to ``stop()``: one DURATION record per interval. A stop
    without a start is counted in ``unmatched``; a second start re-arms the timer."""

    kind = "timer"

    def __init__(self, name: str, tap: RingTap, now: Callable[[], int]) -> None:
        self.name = name
        self._tap = tap
        self._now = now
        self._t0: int | None = None
        self.unmatched = 0

    def start(self) -> None:
        self._t0 = self._now()

    def stop(self) -> None:
        t = self._now()
        t0 = self._t0
        if t0 is None:
            self.unmatched += 1
            return
        self._t0 = None
        self._tap.record(t, t - t0)

    def lapse(self, length: int) -> None:
        """An interval of ``length`` ticks that ends now (measured by the caller)."""
        self._tap.record(self._now(), int(length))


# -- finding a stage's probes -------------------------------------------------------------------

#: The stage the calling thread works for (per thread), and the lock over this process's
#: handles below: ``ss.probe(name)`` is called from stage code anywhere in the process.
_local = threading.local()
_lock = forksafe.lock()
#: Handles of this process, by stage then short name.
_handles: dict[str, dict[str, UserProbe]] = {}


def set_current_stage(stage: str | None) -> None:
    """The calling thread runs ``stage`` (set by the stage loop)."""
    _local.stage = stage


def current_stage() -> str | None:
    stage: str | None = getattr(_local, "stage", None)
    return stage


def register_stage(stage: str, handles: dict[str, UserProbe]) -> None:
    """This process runs ``stage`` now, with these probes (inactive ones as :class:`NullProbe`):
    what ``probe(name)`` returns in the stage's thread. Replaces a previous run's."""
    with _lock:
        _handles[stage] = dict(handles)


def probe(name: str) -> UserProbe:
    """The handle of the calling stage's probe ``name`` (declared with ``Pipeline.probe``).

    ``name`` may also be the full ``STAGE.NAME``. Outside a monitored run, or when no query
    uses the probe, the handle is inactive and does nothing. A name the stage never declared is
    an error.
    """
    stage = current_stage()
    if "." in name and (stage is None or name not in _handles.get(stage, {})):
        stage, _, name = name.rpartition(".")
    if stage is None:
        raise PipelineError(
            f"probe({name!r}) was called outside a stage: call it from the stage's code, or "
            "give the full name STAGE.NAME"
        )
    mine = _handles.get(stage)
    if mine is None:
        return NullProbe(f"{stage}.{name}", "")
    found = mine.get(name)
    if found is None:
        declared = ", ".join(sorted(mine)) or "(none)"
        raise PipelineError(
            f"stage {stage!r} has no probe {name!r} (declared: {declared}); declare it with "
            f"Pipeline.probe({stage!r}, {name!r}, KIND)"
        )
    return found
