"""The run's cost model: the rings' own samples plus the Python extra of each probe class."""

from __future__ import annotations

import math

from streamscope.core.records import Kind
from streamscope.core.topology import ProbeInfo, Topology
from streamscope.probes.cost import CostBook, measure_extras
from streamscope.probes.taps import (
    COST_CALL,
    COST_CENTRAL,
    COST_NAMES,
    COST_NATIVE,
    COST_SAMPLER,
    RingTap,
)


def test_every_python_class_gets_a_finite_extra() -> None:
    extras = measure_extras(n=300, repeats=1)
    assert set(extras) == set(range(len(COST_NAMES)))
    for cls, ns in extras.items():
        assert math.isfinite(ns) and ns >= 0, COST_NAMES[cls]
    assert extras[COST_NATIVE] == 0.0  # written inside native code: no call to add


def test_a_probe_costs_its_rings_sampled_mean_plus_its_class_extra() -> None:
    topo = Topology(
        "t",
        probes=(
            ProbeInfo(1, "tail", "a -> b"),
            ProbeInfo(2, "state", "a"),
            ProbeInfo(3, "sampler", "a.s", storage="centralized"),
            ProbeInfo(4, "sampler", "a.d", storage="distributed"),
        ),
    )
    book = CostBook(
        extras={COST_NATIVE: 0.0, COST_CALL: 40.0, COST_CENTRAL: 700.0, COST_SAMPLER: 90.0}
    )
    book.add_rings({1: (3 * 25, 3, 3000, COST_NATIVE), 2: (2 * 30, 2, 2000, COST_CALL)})
    cost = book.model(topo)
    ns, how = cost(1)
    assert ns == 25.0 and "sampled in the run (3 events)" in how and "call" not in how
    ns, how = cost(2)
    assert ns == 30.0 + 40.0 and "call measured by the monitor" in how
    # No ring of its own sampled (a port of central storage): the mean of every ring sampled.
    mean = (75 + 60) / 5
    assert cost(3) == (mean + 700.0, cost(3)[1])
    assert cost(4)[0] == mean + 90.0
    assert "other probes" in cost(3)[1]


def test_rings_time_one_event_in_1024_as_the_run_goes() -> None:
    tap = RingTap(1, Kind.SAMPLE, 1 << 12)
    for i in range(3000):
        tap.ring.record(i)
    assert tap.ring.cost_n == 3  # events 0, 1024 and 2048
    assert tap.ring.cost_ns >= 0


def test_only_the_classes_a_run_has_are_timed() -> None:
    assert set(measure_extras(n=100, repeats=1, classes={COST_CENTRAL})) == {
        COST_NATIVE,
        COST_CENTRAL,
    }
    book = CostBook()
    book.add_rings({1: (50, 2, 2000, COST_CALL), 2: (40, 2, 2000, COST_NATIVE)})
    topo = Topology("t", probes=(ProbeInfo(1, "tail", "a -> b"), ProbeInfo(2, "state", "a")))
    ns, how = book.model(topo)(1)
    assert "call measured by the monitor" in how
    assert set(book.extras(())) == {COST_NATIVE, COST_CALL}  # nothing else was timed
    assert ns == 25.0 + book.extras(())[COST_CALL]


def test_a_call_is_timed_net_of_the_fastest_empty_loop_not_the_slowest() -> None:
    """Each repeat times the calls, then an empty loop; a busy core may preempt either. The
    extra is the fastest calls less the fastest empty loop: a repeat whose empty loop was
    preempted (900 ns where it takes 100) does not make the calls look free."""
    from streamscope.probes import cost

    stamps = iter([0, 1000, 1900, 2000, 3000, 3100])  # repeat 1: empty preempted; repeat 2 not
    assert cost._per_call(lambda k: None, 10, 2, lambda: next(stamps)) == 90.0  # (1000-100)/10


def test_a_python_extra_is_timed_again_while_its_native_writes_look_dearer_than_it() -> None:
    """The ring times one write in 1,024: a measure's few timed writes, one preempted, made
    their mean dearer than the whole event, and the extra read 0 (a Python channel free). The
    extra is timed again then: here its first try's timed writes took 5 ms, its second's 40 ns."""
    from streamscope.probes import cost

    class Ring:
        cost_ns, cost_n = 0, 0

    class Tap:
        ring = Ring()

    tries = iter([(5_000_000 * 2, 2, 300.0), (80, 2, 250.0)])  # (ns, writes timed, per event)

    def per_event() -> float:
        ns, n, whole = next(tries)
        Tap.ring.cost_ns += ns
        Tap.ring.cost_n += n
        return whole

    assert cost.net_of_native(Tap(), per_event) == 250.0 - 40.0  # type: ignore[arg-type]
