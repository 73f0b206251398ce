"""Function tracing: records in call order, wrappers that behave as the originals, exact
accounting of kept and refused events, the enable switch, and exclusion by name and by rate."""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import sys
import threading
import types
from collections.abc import Iterator

import numpy as np
import pytest

from streamscope.core import native
from streamscope.core.records import Kind
from streamscope.probes.tracing import BY_NAME, FunctionTracer, TraceTap

ENTER, EXIT = int(Kind.ENTER), int(Kind.EXIT)

SOURCE = '''
import asyncio
import math

def plain(a, b=2, /, c=3, *args, d, e=5, **kw):
    """Every kind of parameter."""
    return (a, b, c, args, d, e, kw)

def boom(exc):
    raise exc

def helper(x):
    return x + 1

def outer(n):
    return inner(n) + inner(n + 1)

def inner(n):
    return helper(n)

def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)

class Shape:
    def __init__(self, n):
        self.n = n

    def area(self, k=1):
        return self.n * k

    @staticmethod
    def unit(x):
        return x * 2

    @classmethod
    def make(cls, n):
        return cls(n)

    class Inner:
        def deep(self):
            return "deep"

class Square(Shape):
    def area(self, k=1):
        return super().area(k) * self.n

def gen(n):
    total = 0
    for i in range(n):
        got = yield i
        total += got or 0
    return total

async def coro(x):
    await asyncio.sleep(0)
    return x * 3

async def agen():
    yield 1

sqrt = math.sqrt
alias = helper
'''


@pytest.fixture
def mod() -> Iterator[types.ModuleType]:
    name = "streamscope_test_traced_module"
    m = types.ModuleType(name)
    sys.modules[name] = m
    exec(SOURCE, m.__dict__)
    yield m
    del sys.modules[name]


def ticker() -> itertools.count[int]:
    return itertools.count(100)


def events(tracer: FunctionTracer, tap: TraceTap) -> list[tuple[str, str]]:
    rec, dropped = tap.drain()
    assert dropped == 0
    assert (rec["probe"] == tap.probe).all()
    assert (np.diff(rec["ticks"]) >= 0).all()
    names = [tracer.functions[v - 1].split(":")[1] for v in rec["value"].tolist()]
    kinds = ["enter" if k == ENTER else "exit" for k in rec["kind"].tolist()]
    return list(zip(kinds, names, strict=True))


def test_nested_and_recursive_calls_record_in_call_order(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    tracer.instrument_module(mod, include=["outer", "inner", "helper", "fact"])
    tap = tracer.bind("stage", 9)
    assert mod.outer(1) == 5
    assert events(tracer, tap) == [
        ("enter", "outer"),
        ("enter", "inner"),
        ("enter", "helper"),
        ("exit", "helper"),
        ("exit", "inner"),
        ("enter", "inner"),
        ("enter", "helper"),
        ("exit", "helper"),
        ("exit", "inner"),
        ("exit", "outer"),
    ]
    assert mod.fact(3) == 6
    assert events(tracer, tap) == [
        ("enter", "fact"),
        ("enter", "fact"),
        ("enter", "fact"),
        ("exit", "fact"),
        ("exit", "fact"),
        ("exit", "fact"),
    ]
    assert tap.stage == "stage"
    assert tap.kind == ENTER


def test_an_exception_records_exit_and_propagates_unchanged(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    boom = tracer.instrument(mod.boom)
    tap = tracer.bind("s", 1)
    err = KeyError("k")
    with pytest.raises(KeyError) as info:
        boom(err)
    assert info.value is err
    assert info.traceback[-1].name == "boom"  # raised by the original, not the wrapper
    assert events(tracer, tap) == [("enter", "boom"), ("exit", "boom")]


def test_wrappers_behave_as_the_originals(mod: types.ModuleType) -> None:
    orig = {n: getattr(mod, n) for n in ("plain", "fact")}
    orig_shape = dict(vars(mod.Shape))
    tracer = FunctionTracer()
    names = tracer.instrument_module(mod)
    prefix = mod.__name__ + ":"
    assert sorted(n.removeprefix(prefix) for n in names) == sorted(
        [
            "plain",
            "boom",
            "helper",
            "outer",
            "inner",
            "fact",
            "Shape.__init__",
            "Shape.area",
            "Shape.unit",
            "Shape.make",
            "Shape.Inner.deep",
            "Square.area",
            "gen",
            "coro",
        ]
    )
    assert mod.sqrt is __import__("math").sqrt  # imported, not defined here: left alone
    assert mod.alias is mod.helper  # an alias gets the same wrapper
    tap = tracer.bind("s", 1)
    assert mod.plain(1, d=4) == (1, 2, 3, (), 4, 5, {})
    assert mod.plain(1, 0, 9, 8, 7, d=1, e=2, z=3) == (1, 0, 9, (8, 7), 1, 2, {"z": 3})
    with pytest.raises(TypeError) as info:
        mod.plain(a=1, d=4)  # positional-only, as in the original
    assert "plain()" in str(info.value)
    with pytest.raises(TypeError):
        mod.plain(1)  # d is required
    shape = mod.Shape.make(3)
    assert isinstance(shape, mod.Shape)
    assert shape.area() == 3
    assert shape.area(k=2) == 6
    assert mod.Shape.area(shape, 4) == 12  # unbound
    assert mod.Shape.unit(5) == 10
    assert shape.unit(5) == 10
    assert mod.Shape.Inner().deep() == "deep"
    assert mod.Square(3).area(2) == 18  # zero-argument super() still finds its class
    assert isinstance(vars(mod.Shape)["unit"], staticmethod)
    assert isinstance(vars(mod.Shape)["make"], classmethod)
    for name, fn in orig.items():
        wrapper = getattr(mod, name)
        assert wrapper is not fn
        assert wrapper.__wrapped__ is fn
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            assert getattr(wrapper, attr) == getattr(fn, attr)
        assert inspect.signature(wrapper) == inspect.signature(fn)
    assert vars(mod.Shape)["area"].__wrapped__ is orig_shape["area"]
    # every call above was recorded (a call that fails to bind its arguments is not a call)
    kinds = tap.drain()[0]["kind"].tolist()
    assert kinds.count(ENTER) == kinds.count(EXIT) == 13


def test_generators_and_coroutines_are_timed_per_resumption(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    tracer.instrument_module(mod, include=["gen", "coro", "agen"])
    assert inspect.isgeneratorfunction(mod.gen)
    assert inspect.iscoroutinefunction(mod.coro)
    assert tracer.excluded[f"{mod.__name__}:agen"].startswith("async generator")
    tap = tracer.bind("s", 1)
    with pytest.raises(TypeError):
        mod.gen(1, 2)  # arguments are bound at the call, as by the original, not at next()
    with pytest.raises(TypeError):
        mod.coro()
    g = mod.gen(3)
    assert next(g) == 0
    assert g.send(5) == 1
    assert g.send(6) == 2
    with pytest.raises(StopIteration) as stop:
        g.send(7)
    assert stop.value.value == 18
    assert events(tracer, tap) == [("enter", "gen"), ("exit", "gen")] * 4
    g = mod.gen(3)
    next(g)
    with pytest.raises(ValueError, match="inside"):
        g.throw(ValueError("inside"))
    g = mod.gen(3)
    next(g)
    g.close()
    assert events(tracer, tap) == [("enter", "gen"), ("exit", "gen")] * 4
    assert asyncio.run(mod.coro(2)) == 6
    rec = events(tracer, tap)
    assert rec == [("enter", "coro"), ("exit", "coro")] * (len(rec) // 2)
    assert len(rec) >= 4  # one resumption per step of the event loop


def test_restore_puts_every_original_back(mod: types.ModuleType) -> None:
    before = dict(vars(mod))
    shape_before = dict(vars(mod.Shape))
    inner_before = dict(vars(mod.Shape.Inner))
    tracer = FunctionTracer()
    tracer.instrument_module(mod)
    assert vars(mod)["helper"] is not before["helper"]
    assert vars(mod.Shape)["unit"] is not shape_before["unit"]
    tracer.restore()
    assert dict(vars(mod)) == before
    for key, value in shape_before.items():
        assert vars(mod.Shape)[key] is value, key
    for key, value in inner_before.items():
        assert vars(mod.Shape.Inner)[key] is value, key
    # and the module can be instrumented again
    assert tracer.instrument_module(mod, include=["helper"]) == [f"{mod.__name__}:helper"]


def test_exclusion_by_name_pattern_leaves_functions_unwrapped(mod: types.ModuleType) -> None:
    tracer = FunctionTracer(exclude=["helper", "Shape.*", "*:fact"])
    helper, fact = mod.helper, mod.fact
    area = vars(mod.Shape)["area"]
    names = tracer.instrument_module(mod)
    assert mod.helper is helper
    assert mod.fact is fact
    assert vars(mod.Shape)["area"] is area
    assert mod.outer is not vars(mod)["inner"]
    assert tracer.excluded[f"{mod.__name__}:helper"] == BY_NAME
    assert tracer.excluded[f"{mod.__name__}:Shape.area"] == BY_NAME
    assert tracer.excluded[f"{mod.__name__}:fact"] == BY_NAME
    assert not any(n.endswith((":helper", ":fact")) or ":Shape." in n for n in names)
    assert tracer.instrument(helper) is helper


def test_include_patterns_select_what_is_wrapped(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    names = tracer.instrument_module(mod.__name__, include=["Shape.*"])
    assert sorted(n.split(":")[1] for n in names) == [
        "Shape.Inner.deep",
        "Shape.__init__",
        "Shape.area",
        "Shape.make",
        "Shape.unit",
    ]
    assert not hasattr(mod.helper, "__wrapped__")


def test_unbound_threads_record_nothing(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    helper = tracer.instrument(mod.helper)
    tap = tracer.bind("main", 1)
    out: list[int] = []
    t = threading.Thread(target=lambda: out.extend(helper(i) for i in range(100)))
    t.start()
    t.join()
    assert out == list(range(1, 101))
    rec, dropped = tap.drain()
    assert (len(rec), dropped) == (0, 0)
    assert tracer.calls == [0]
    tracer.unbind()
    helper(1)
    assert len(tap.drain()[0]) == 0


def test_each_bound_thread_records_into_its_own_tap(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    helper = tracer.instrument(mod.helper)
    taps: dict[str, TraceTap] = {}

    def work(stage: str, n: int) -> None:
        taps[stage] = tracer.bind(stage, len(stage))
        for i in range(n):
            helper(i)

    threads = [threading.Thread(target=work, args=(s, n)) for s, n in (("a", 10), ("bb", 20))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taps["a"].drain()[0]) == 20
    rec = taps["bb"].drain()[0]
    assert len(rec) == 40
    assert (rec["probe"] == 2).all()
    assert tracer.calls == [30]


def check_nested(streams: list[np.ndarray], stack: list[int]) -> int:
    """Replays drained records: every EXIT closes the innermost open ENTER. Returns records."""
    n = 0
    for rec in streams:
        for kind, fid in zip(rec["kind"].tolist(), rec["value"].tolist(), strict=True):
            if kind == ENTER:
                stack.append(fid)
            else:
                assert stack and stack[-1] == fid, "torn or misnested record"
                stack.pop()
            n += 1
    return n


@pytest.mark.parametrize("capacity", [1 << 16, 7])
def test_switching_while_another_thread_calls_never_tears_records(
    mod: types.ModuleType, capacity: int
) -> None:
    tracer = FunctionTracer(capacity=capacity)
    tracer.instrument_module(mod, include=["outer", "inner", "helper"])
    stop = threading.Event()
    bound = threading.Event()
    tap_box: list[TraceTap] = []

    def worker() -> None:
        tap_box.append(tracer.bind("w", 1))
        bound.set()
        while not stop.is_set():
            mod.outer(1)

    t = threading.Thread(target=worker)
    t.start()
    bound.wait()
    tap = tap_box[0]
    drained: list[np.ndarray] = []
    refused = 0
    stack: list[int] = []
    kept = 0
    for i in range(400):
        tracer.enabled = i % 2 == 1
        rec, dropped = tap.drain()
        drained.append(rec)
        refused += dropped
        kept += check_nested([rec], stack)
    stop.set()
    t.join()
    rec, dropped = tap.drain()
    kept += check_nested([rec], stack)
    refused += dropped
    assert stack == []  # every ENTER got its EXIT in the same or a later drain
    assert kept > 0
    # exact: every event of every traced call was kept or refused, once
    assert kept + refused == 2 * sum(tracer.calls)
    if capacity < 16:
        assert refused > 0


def test_overflow_accounting_is_exact(mod: types.ModuleType) -> None:
    tracer = FunctionTracer(capacity=8)
    tracer.instrument_module(mod, include=["outer", "inner", "helper"])
    tap = tracer.bind("s", 1)
    mod.outer(1)  # 3 calls in a row -> 10 events: (outer (inner (helper)) (inner (helper)))
    rec, dropped = tap.drain()
    # An ENTER is kept only with room for itself, its EXIT and the EXIT of every open call:
    # outer, inner, helper and their EXITs take 5 slots; the second inner (2 open) needs 3 of
    # the 3 left and is kept; its helper would need 4 and is refused with its EXIT (2); both
    # EXITs still open have their room.
    assert rec["kind"].tolist() == [ENTER] * 3 + [EXIT] * 2 + [ENTER] + [EXIT] * 2
    assert dropped == 2
    assert len(rec) + dropped == 10
    calls = dict(zip(tracer.functions, tracer.calls, strict=True))
    m = mod.__name__
    assert calls == {f"{m}:outer": 1, f"{m}:inner": 2, f"{m}:helper": 2}
    for _ in range(7):
        mod.helper(1)
    rec, dropped = tap.drain()
    assert (len(rec), dropped) == (8, 6)  # 4 kept pairs, 3 refused pairs
    assert dict(zip(tracer.functions, tracer.calls, strict=True))[f"{m}:helper"] == 9
    assert tap.drain()[1] == 0  # refusals are reported once


def test_a_trace_ring_rounds_its_capacity_up_and_keeps_the_exits_of_open_calls(
    mod: types.ModuleType,
) -> None:
    tracer = FunctionTracer(capacity=3)
    tracer.instrument_module(mod, include=["outer", "inner", "helper"])
    tap = tracer.bind("s", 1)
    assert tap.cap == 4
    mod.outer(1)
    rec, dropped = tap.drain()
    # outer (needs 2 of 4), inner (needs 3 of 3), helper (needs 4 of 2: refused), EXIT inner,
    # the second inner (needs 3 of 1: refused), so its helper never gets a chance, EXIT outer.
    assert rec["kind"].tolist() == [ENTER, ENTER, EXIT, EXIT]
    assert rec["value"].tolist() == [
        tracer.functions.index(f"{mod.__name__}:{f}") + 1
        for f in ("outer", "inner", "inner", "outer")
    ]
    assert dropped == 2 * 3  # helper, inner, helper: each with its EXIT
    assert tap.ring.depth == 0


def test_disabled_wrappers_call_straight_through(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    helper = tracer.instrument(mod.helper)
    tap = tracer.bind("s", 1)
    tracer.disable()
    assert not tracer.enabled
    assert helper(1) == 2
    assert len(tap.drain()[0]) == 0
    tracer.enable()
    helper(1)
    assert len(tap.drain()[0]) == 2
    late = tracer.instrument(mod.inner)  # made while enabled: on at once
    tracer.enabled = False
    late(1)
    assert tracer.calls == [1, 0]


def test_check_rates_excludes_a_hot_function_and_not_a_cold_one(mod: types.ModuleType) -> None:
    clock = native.Clock("manual")
    tracer = FunctionTracer(clock=clock, max_calls_per_s=100.0, ticks_per_s=1000.0)
    hot = tracer.instrument(mod.helper)
    cold = tracer.instrument(mod.fact)
    tap = tracer.bind("s", 1)
    for _ in range(150):
        hot(1)
    for _ in range(50):
        cold(1)
    clock.set(1000)  # one second of fake ticks
    assert tracer.check_rates(clock.now()) == [f"{mod.__name__}:helper"]
    assert tracer.excluded == {f"{mod.__name__}:helper": "150 calls/s > 100"}
    tap.drain()
    hot(1)
    cold(1)
    rec = tap.drain()[0]
    assert rec["value"].tolist() == [2, 2]  # only cold is recorded now
    # a rate is taken over the interval since the previous check only
    for _ in range(39):
        cold(1)
    clock.set(1500)
    assert tracer.check_rates(clock.now()) == []  # 40 calls in 0.5 s
    for _ in range(60):
        cold(1)
    clock.set(2000)
    assert tracer.check_rates(clock.now()) == [f"{mod.__name__}:fact"]  # 60 calls in 0.5 s
    tap.drain()
    tracer.enable()
    hot(1)
    assert len(tap.drain()[0]) == 0  # enable() does not bring back what the rate excluded


def test_check_rates_without_a_limit_excludes_nothing(mod: types.ModuleType) -> None:
    clock = native.Clock("manual")
    tracer = FunctionTracer(clock=clock)
    hot = tracer.instrument(mod.helper)
    tracer.bind("s", 1)
    for _ in range(1000):
        hot(1)
    clock.set(1)
    assert tracer.check_rates(clock.now()) == []
    assert tracer.calls == [1000]


def test_an_instrumented_function_is_not_wrapped_twice(mod: types.ModuleType) -> None:
    tracer = FunctionTracer()
    once = tracer.instrument(mod.helper)
    assert tracer.instrument(once) is once
    again = tracer.instrument(mod.helper)  # the original again: same name, same id
    assert again is not once
    assert tracer.functions == [f"{mod.__name__}:helper"]
    decorated = tracer.instrument(functools.partial(mod.helper, 1))
    tracer.bind("s", 1)
    assert decorated() == 2
    assert sum(tracer.calls) == 1
