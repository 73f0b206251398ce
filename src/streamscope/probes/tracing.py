"""Function enter/exit tracing, in the manner of gcc's ``-finstrument-functions`` (Castells-Rufas
et al., Performance Analysis Techniques for Multi-Soft-Core and Many-Soft-Core Systems, 2012, §3).

In: Python functions, wrapped one by one or a whole module at a time; calls made by bound threads.
Out: per-thread ``TraceTap`` rings of ENTER/EXIT records (value = the function's id in
``FunctionTracer.functions``), drained by the monitor like any other ring.

The hot path is one generated wrapper per function, with the original's own signature (no
``*args``/``**kwargs`` packing): one flag check, one thread-local lookup and one native call per
event (``core.native.Ring.enter``/``exit``: a clock read and a record), generated in
``probes/tracecode.py``. Its per-call costs, and the alternatives measured, are in
``benchmarks/README.md`` (bench_tracing).
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import threading
from collections.abc import Callable, Iterable
from types import FunctionType, ModuleType
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from streamscope.core import forksafe, native
from streamscope.core.records import Kind
from streamscope.probes.taps import COST_TRACE, DEFAULT_CAPACITY, Recorder, RingTap, host_clock
from streamscope.probes.tracecode import ThreadBinding, make_wrapper

F = TypeVar("F", bound=Callable[..., Any])

#: Set on every wrapper this module makes: the function's id (a wrapper is never wrapped again).
MARKER = "__streamscope_fid__"
#: Why a function was not traced, as it appears in ``FunctionTracer.excluded``.
BY_NAME = "name pattern"
ASYNC_GENERATOR = "async generator (not traced)"


class TraceTap(RingTap):
    """One bound thread's ENTER/EXIT ring (single writer: its thread), with the stage it traces.

    Its capacity is a power of two (rounded up). The ring counts the calls of each function
    (kept or refused) as it records them: the tracer's call-rate check reads them there.
    """

    __slots__ = ("stage",)

    def __init__(
        self,
        probe: int,
        stage: str,
        capacity: int = DEFAULT_CAPACITY,
        *,
        clock: native.Clock | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        if capacity <= 0:
            raise ValueError("a trace tap needs room for at least one event")
        cap = 1 << max(1, (capacity - 1).bit_length())
        if recorder is not None:
            super().__init__(
                probe, int(Kind.ENTER), cap, clock=recorder.clock,
                directory=recorder.directory, cost=COST_TRACE,
            )  # fmt: skip
        else:
            super().__init__(probe, int(Kind.ENTER), cap, clock=clock, cost=COST_TRACE)
        self.stage = stage

    def calls(self) -> NDArray[np.int64]:
        """Calls made by this thread so far, by function id (index 0 unused), kept or refused."""
        return np.asarray(self.ring.calls(), dtype=np.int64)


class FunctionTracer:
    """Wraps functions so that calls made by bound threads record ENTER and EXIT.

    ``functions`` is the function table: a function's id is its index + 1, names are
    ``"module:qualname"`` (one id per name). Exclude patterns (fnmatch) are matched against the
    full name and against the qualified name alone. ``max_calls_per_s`` turns on rate
    exclusion (``check_rates``), the paper's ``no_instrument_function`` decided at run time.

    Generators and coroutines are traced per resumption: each ``next``/``send``/``throw`` and
    the final ``close`` is one call. Async generator functions are left alone (in ``excluded``).
    A wrapper adds one frame per call: deep recursion meets the recursion limit at half depth.
    """

    def __init__(
        self,
        *,
        clock: native.Clock | None = None,
        capacity: int = 1 << 16,
        exclude: Iterable[str] = (),
        max_calls_per_s: float | None = None,
        ticks_per_s: float = 1e9,
    ) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be at least one event")
        self.clock = clock if clock is not None else host_clock()
        self.capacity = capacity
        self.exclude = tuple(exclude)
        self.max_calls_per_s = max_calls_per_s
        self.ticks_per_s = ticks_per_s
        self.functions: list[str] = []
        self.excluded: dict[str, str] = {}
        self._ids: dict[str, int] = {}
        self._switches: list[list[Callable[[bool], None]]] = [[]]  # by fid
        self._off: set[int] = set()  # fids excluded by rate
        self._enabled = True
        self._loc = ThreadBinding()
        self._taps: list[TraceTap] = []
        self._replaced: list[tuple[object, str, object]] = []
        self._lock = forksafe.rlock()
        self._last_check = self.clock.now()
        self._last_calls: NDArray[np.int64] = np.zeros(1, dtype=np.int64)

    # -- the switch -------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        with self._lock:
            self._enabled = bool(value)
            for fid, switches in enumerate(self._switches):
                on = self._enabled and fid not in self._off
                for switch in switches:
                    switch(on)

    def enable(self) -> None:
        self.enabled = True

    def disable(self) -> None:
        self.enabled = False

    # -- wrapping ---------------------------------------------------------------------------

    def _excluded_by_name(self, name: str, qualname: str) -> bool:
        return any(
            fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(qualname, p) for p in self.exclude
        )

    def _fid(self, name: str) -> int:
        fid = self._ids.get(name)
        if fid is None:
            self.functions.append(name)
            self._switches.append([])
            fid = self._ids[name] = len(self.functions)
        return fid

    def instrument(self, fn: F) -> F:
        """A wrapper of ``fn`` that records its calls (usable as a decorator).

        Returns ``fn`` itself when it is already a wrapper, excluded by name, or an async
        generator function. The wrapper behaves as ``fn`` does: same arguments, defaults,
        return value and exceptions, and ``functools.wraps`` metadata (``__wrapped__``).
        """
        if hasattr(fn, MARKER):
            return fn
        qualname = str(getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))))
        name = f"{getattr(fn, '__module__', None)}:{qualname}"
        with self._lock:
            if self._excluded_by_name(name, qualname):
                self.excluded[name] = BY_NAME
                return fn
            if inspect.isasyncgenfunction(fn):
                self.excluded[name] = ASYNC_GENERATOR
                return fn
            fid = self._fid(name)
            on = self._enabled and fid not in self._off
            wrapper, switch = make_wrapper(fn, fid, qualname, self._loc)
            setattr(wrapper, MARKER, fid)
            switch(on)
            self._switches[fid].append(switch)
        return cast(F, wrapper)

    def instrument_module(
        self, module: ModuleType | str, include: Iterable[str] = ("*",)
    ) -> list[str]:
        """Wrap, in place, the module's own functions and the methods of its own classes
        (staticmethod and classmethod included, nested classes too) whose qualified name
        matches an ``include`` pattern and no exclude pattern. ``restore`` undoes it.

        Returns the full names of what was wrapped.
        """
        mod = importlib.import_module(module) if isinstance(module, str) else module
        modname = mod.__name__
        patterns = tuple(include)
        done: dict[int, Callable[..., Any]] = {}  # id(original) -> wrapper (aliases share one)
        names: list[str] = []

        def wrap(fn: FunctionType) -> Callable[..., Any]:
            got = done.get(id(fn))
            if got is None:
                got = done[id(fn)] = self.instrument(fn)
                if got is not fn:
                    names.append(f"{modname}:{fn.__qualname__}")
            return got

        def visit(owner: object, space: dict[str, Any], prefix: str) -> None:
            for attr, value in list(space.items()):
                if isinstance(value, staticmethod | classmethod):
                    fn = value.__func__
                    if (
                        _defined_in(fn, modname, patterns)
                        and (new := wrap(cast(FunctionType, fn))) is not fn
                    ):
                        self._replace(owner, attr, value, type(value)(new))
                elif _defined_in(value, modname, patterns):
                    if (new := wrap(value)) is not value:
                        self._replace(owner, attr, value, new)
                elif (
                    isinstance(value, type)
                    and value.__module__ == modname
                    and value.__qualname__ == f"{prefix}{attr}"
                ):
                    visit(value, dict(vars(value)), f"{value.__qualname__}.")

        with self._lock:
            visit(mod, dict(vars(mod)), "")
        return names

    def _replace(self, owner: object, attr: str, old: object, new: object) -> None:
        setattr(owner, attr, new)
        self._replaced.append((owner, attr, old))

    def restore(self) -> None:
        """Put back every module and class attribute that ``instrument_module`` replaced.
        Wrappers handed out by ``instrument`` stay wrappers (their holders keep them)."""
        with self._lock:
            while self._replaced:
                owner, attr, old = self._replaced.pop()
                setattr(owner, attr, old)

    # -- threads ----------------------------------------------------------------------------

    def bind(self, stage: str, probe: int) -> TraceTap:
        """From now on, traced calls made by the calling thread record into the returned tap
        (a new, private one; a second ``bind`` replaces the first, which can still be drained)."""
        tap = TraceTap(probe, stage, self.capacity, clock=self.clock)
        self.bind_tap(tap)
        return tap

    def bind_tap(self, tap: TraceTap) -> None:
        """Like ``bind``, into a tap made beforehand (a ring the monitor drains)."""
        with self._lock:
            self._taps.append(tap)
        self._loc.tap = tap
        self._loc.ring = tap.ring

    def unbind(self) -> None:
        """The calling thread stops recording (calls open now still record their EXIT)."""
        self._loc.ring = None
        self._loc.tap = None

    # -- rates ------------------------------------------------------------------------------

    @property
    def calls(self) -> list[int]:
        """Traced calls per function (parallel to ``functions``), kept or refused, in bound
        threads since the start, as the taps counted them."""
        with self._lock:
            taps = list(self._taps)
        total = np.zeros(len(self.functions) + 1, dtype=np.int64)
        for tap in taps:
            got = tap.calls()
            total[: got.size] += got[: total.size]
        return [int(c) for c in total[1:]]

    def check_rates(self, now_ticks: int) -> list[str]:
        """Exclude, from now on, every function called faster than ``max_calls_per_s`` since
        the previous check (``now_ticks`` on the tracer's clock). Returns the newly excluded."""
        counts = np.array([0, *self.calls], dtype=np.int64)
        with self._lock:
            elapsed_s = (now_ticks - self._last_check) / self.ticks_per_s
            if elapsed_s <= 0:
                return []
            last = np.zeros(counts.size, dtype=np.int64)
            last[: self._last_calls.size] = self._last_calls[: counts.size]
            self._last_check, self._last_calls = now_ticks, counts
            limit = self.max_calls_per_s
            if limit is None:
                return []
            rates = (counts - last) / elapsed_s
            newly = []
            for fid in np.flatnonzero(rates > limit).tolist():
                if fid in self._off:
                    continue
                self._off.add(fid)
                name = self.functions[fid - 1]
                self.excluded[name] = f"{rates[fid]:.0f} calls/s > {limit:.0f}"
                for switch in self._switches[fid]:
                    switch(False)
                newly.append(name)
        return newly


def _defined_in(fn: object, modname: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``fn`` is a function of module ``modname`` whose qualified name (alone, or
    ``module:qualname``) matches one of ``patterns``."""
    if not isinstance(fn, FunctionType) or fn.__module__ != modname:
        return False
    q = fn.__qualname__
    return any(
        fnmatch.fnmatchcase(q, p) or fnmatch.fnmatchcase(f"{modname}:{q}", p) for p in patterns
    )


# -- the process's tracer ------------------------------------------------------------------------

#: The tracer of this process: process-wide because Python's profile hook is (one per
#: process, ``sys.setprofile``); None while no run traces functions.
_active: FunctionTracer | None = None


def activate(tracer: FunctionTracer | None) -> None:
    """Make ``tracer`` this process's (inherited by the stage processes it forks)."""
    global _active
    _active = tracer


def active() -> FunctionTracer | None:
    return _active


def set_enabled(enabled: bool) -> bool:
    """Switch this process's function tracing on or off while running; returns the previous
    setting (False when nothing is traced)."""
    tracer = _active
    if tracer is None:
        return False
    before = tracer.enabled
    tracer.enabled = enabled
    return before


class RateWatch:
    """The tracer's call-rate check, run every ``every_s`` in a thread of its own (only when a
    rate limit is set); the functions it newly leaves out go to ``notify`` as a note."""

    def __init__(
        self,
        tracer: FunctionTracer,
        notify: Callable[[dict[str, object]], None],
        every_s: float = 0.05,
    ) -> None:
        self.tracer = tracer
        self._notify = notify
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamscope-rates", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def check(self) -> None:
        newly = self.tracer.check_rates(self.tracer.clock.now())
        if newly:
            self._notify({"trace_excluded": {n: self.tracer.excluded[n] for n in newly}})

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self.check()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self.check()
