"""A state tracker's sampled service times: the ns a worker was busy on an item (its waits left
out) and its thread's CPU ns then, in both the native core and its twin; the monitor's
reservoir of them per stage."""

from __future__ import annotations

import time
from types import ModuleType

import numpy as np
import pytest

from streamscope.core import native, rings
from streamscope.core.records import Kind, State, empty_records
from streamscope.reduction.servicetimes import ServiceTimes
from streamscope.transport.ringreader import RingReader

IMPLS = native.implementations()


def _spin(ns: int) -> None:
    end = time.monotonic_ns() + ns
    while time.monotonic_ns() < end:
        pass


def _tracker(impl: ModuleType, cpu: bool = True) -> tuple[object, RingReader]:
    mem = rings.anonymous_ring(4, int(Kind.STATE), 1024)
    clock = impl.Clock("host")
    ring = impl.Ring(mem, clock)
    return impl.StateTracker("stage", ring, cpu), RingReader(mem)


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_an_items_service_is_its_busy_time_and_cpu_its_waits_left_out(impl: str) -> None:
    tr, reader = _tracker(IMPLS[impl])
    now = time.monotonic_ns
    tr.set(State.BUSY)
    t = [now()]  # the test's own stamps, either side of each call that starts or ends busy
    tr.took()  # item 1: timed (none was before)
    t.append(now())
    _spin(3_000_000)  # busy 3 ms computing
    t.append(now())
    prev = tr.set(State.BLOCKED_OUT)
    t.append(now())
    time.sleep(0.004)  # 4 ms waiting for room: not service
    t.append(now())
    tr.set(prev)
    t.append(now())
    _spin(1_000_000)
    tr.gave()  # a put of a worker that takes: no boundary
    t.append(now())
    prev = tr.set(State.BLOCKED_IN)
    t.append(now())
    time.sleep(0.004)
    t.append(now())
    tr.set(prev)
    t.append(now())
    t.append(now())
    tr.took()  # item 2 taken: item 1 timed
    t.append(now())
    # busy from within each call that began it to within each that ended it
    least = (t[2] - t[1]) + (t[6] - t[5]) + (t[10] - t[9])
    most = (t[3] - t[0]) + (t[7] - t[4]) + (t[11] - t[8])
    rec = reader.drain().records
    kinds = rec["kind"].tolist()
    assert kinds.count(Kind.DURATION) == 1 and kinds.count(Kind.SAMPLE) == 2
    i = kinds.index(Kind.DURATION)
    wall, cpu, runq = (int(v) for v in rec["value"][i : i + 3])
    assert kinds[i + 1] == kinds[i + 2] == Kind.SAMPLE
    assert 0 <= runq <= t[-1] - t[0]  # its waits for a core over the item's span
    assert least <= wall <= most  # its busy time, the 8 ms of waits left out
    assert 0 < cpu <= most  # the thread's CPU time within it
    states = [int(v) for k, v in zip(kinds, rec["value"].tolist(), strict=True) if k == Kind.STATE]
    changes = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]  # heartbeats out
    assert changes == [State.BUSY, State.BLOCKED_OUT, State.BUSY, State.BLOCKED_IN, State.BUSY]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_items_are_timed_at_most_once_a_millisecond_and_a_sources_puts_bound_them(
    impl: str,
) -> None:
    tr, reader = _tracker(IMPLS[impl], cpu=False)
    tr.set(State.BUSY)
    t0 = time.monotonic_ns()
    n = 0
    while time.monotonic_ns() - t0 < 20_000_000:  # 20 ms of 20 us items, made and put
        _spin(20_000)
        tr.gave()
        n += 1
    rec = reader.drain().records
    walls = rec["value"][rec["kind"] == Kind.DURATION]
    cpus = rec["value"][rec["kind"] == Kind.SAMPLE]  # CPU and run queue: neither read
    spacing = IMPLS[impl].service_spacing_ns()  # 1 ms, unless the process has many workers
    assert n > 200
    assert min(5, 20_000_000 // spacing // 4) <= len(walls) <= 20_000_000 // spacing + 1
    assert np.all(cpus == -1)  # not read
    assert np.median(walls) >= 20_000


def test_the_monitor_keeps_a_uniform_sample_of_each_stages_service_times() -> None:
    st = ServiceTimes(keep=100)
    rec = empty_records(3 * 1000)
    rec["kind"][0::3] = Kind.DURATION
    rec["kind"][1::3] = rec["kind"][2::3] = Kind.SAMPLE
    rec["value"][0::3] = np.arange(1000)
    rec["value"][1::3] = -1
    rec["value"][2::3] = 7
    st.take("s", rec[:1500])
    st.take("s", rec[1500:])
    assert st.seen["s"] == 1000 and len(st.kept["s"]) == 100
    walls = [w for w, _, _ in st.kept["s"]]
    assert all(c is None and q == 7 for _, c, q in st.kept["s"])
    assert 300 < np.mean(walls) < 700  # drawn from the whole run, not its start


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_process_of_many_workers_times_each_less_often(impl: str) -> None:
    """Past eight workers (trackers that record) in a process, each is timed proportionally
    less often: the process times some 8,000 items a second at most, however many threads."""
    mod = IMPLS[impl]
    base = mod.service_spacing_ns()
    many = [_tracker(mod, cpu=False) for _ in range(160)]
    spacing = mod.service_spacing_ns()
    assert spacing >= 20 * 1_000_000 and spacing > base
    tr, reader = many[0]
    tr.set(State.BUSY)
    t0 = time.monotonic_ns()
    while time.monotonic_ns() - t0 < 20_000_000:  # 20 ms of items, one timed at most
        _spin(20_000)
        tr.gave()
    walls = reader.drain().records
    assert int(np.sum(walls["kind"] == Kind.DURATION)) <= 1
    del many, tr, reader
    assert mod.service_spacing_ns() == base  # the workers gone, the spacing back
