"""The RTL device's parts (``hw.rtl``) against the Python probes they stand in for: the storage
cores, simulated and read over the simulated register link, keep and refuse exactly the samples
``probes.storage`` keeps and refuses, with their ticks; the timestamp core answers with the
device clock it keeps pace with."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamscope.core.errors import ConfigError
from streamscope.core.records import Kind
from streamscope.hw.link import MAGIC, Registers
from streamscope.hw.rtl import RtlClock, RtlStorage
from streamscope.probes.storage import CentralStorage, DistributedStorage
from streamscope.probes.taps import Recorder
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

PROBES = 3
#: Per event: (cycles since the last one, which probes sample: a bit each). A probe samples at
#: most once a cycle (a core takes one sample a probe a cycle: see the last test).
_events = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 7)), min_size=1, max_size=120)


def _offers(events: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(cycle, probe, value) of each sample, in cycle order."""
    out, cycle = [], 0
    for gap, bits in events:
        cycle += gap
        out += [(cycle, i, (cycle * 7 + i) - 50) for i in range(PROBES) if bits >> i & 1]
    return out


def _run(storage: Any, offers: list[tuple[int, int, int]]) -> dict[str, Any]:
    """Offer every sample (its ticks: three a cycle), settle, and take what the rings hold."""
    ports = [storage.port(100 + i) for i in range(PROBES)]
    for cycle, i, value in offers:
        ports[i].offer(3 * cycle + i, value, cycle)
    storage.settle()
    samples, dropped = [], {}
    for tap in storage.taps():
        recs, lost = tap.drain()
        samples += [(int(r["probe"]), int(r["ticks"]), int(r["value"])) for r in recs]
        dropped[tap.probe] = dropped.get(tap.probe, 0) + lost
    counts = [(p.written, p.contention, p.overflow) for p in ports]
    return {"samples": sorted(samples), "dropped": dropped, "counts": counts}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events, ports=st.sampled_from([1, 2]), hold=st.integers(1, 2))
@example(events=[(1, 7)] * 30, ports=1, hold=1)  # every probe every cycle: contention
@example(events=[(1, 7)] * 8 + [(9, 1)] * 3, ports=2, hold=2)
def test_the_rtl_central_storage_keeps_and_refuses_as_the_python_one(
    events: list[tuple[int, int]], ports: int, hold: int
) -> None:
    offers = _offers(events)
    rtl = RtlStorage("centralized", capacity=256, ports=ports, hold=hold, recorder=Recorder())
    ref = CentralStorage(Kind.SAMPLE, capacity=256, ports=ports, hold=hold, recorder=Recorder())
    try:
        assert _run(rtl, offers) == _run(ref, offers)
    finally:
        rtl.close()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events, capacity=st.sampled_from([4, 64]))
def test_the_rtl_distributed_storage_keeps_and_refuses_as_the_python_one(
    events: list[tuple[int, int]], capacity: int
) -> None:
    """With a small buffer the core and the ring are both full at times: each counts the
    sample it could not keep, the core's read over the link."""
    offers = _offers(events)
    rtl = RtlStorage("distributed", capacity=capacity, recorder=Recorder(capacity=capacity))
    ref = DistributedStorage(Kind.SAMPLE, capacity=capacity, recorder=Recorder(capacity=capacity))
    try:
        got, want = _run(rtl, offers), _run(ref, offers)
    finally:
        rtl.close()
    assert got["samples"] == want["samples"] and got["dropped"] == want["dropped"]


def test_reading_beside_a_busy_arbiter_changes_no_grant_or_drop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every probe samples every cycle, so the arbiter is never idle long enough to empty the
    hold registers: the host must read the core (a 16-sample buffer here) in the middle of it,
    between two design cycles (the core's ``run`` input low), hundreds of times. Nothing of
    it shows: every sample kept and refused as the Python storage keeps and refuses it."""
    import streamscope.hw.rtl as rtl_module

    monkeypatch.setattr(rtl_module, "CORE_CAPACITY", 16)
    offers = _offers([(1, 7)] * 400 + [(2, 5)] * 100)
    rtl = RtlStorage("centralized", capacity=4096, ports=2, hold=1, recorder=Recorder())
    ref = CentralStorage(Kind.SAMPLE, capacity=4096, ports=2, hold=1, recorder=Recorder())
    try:
        got = _run(rtl, offers)
        assert rtl.core_capacity == 16 and rtl.link.cycles > 5 * len(got["samples"])  # read out
    finally:
        rtl.close()
    assert got == _run(ref, offers)
    assert all(c[1] for c in got["counts"]) and not any(c[2] for c in got["counts"])


def test_the_rtl_clock_answers_with_the_device_clock() -> None:
    spec = EmulatedClockSpec.parse("rate_ppm=25,offset_s=3.5,drift_ppb_s=10,tick_ns=7.5")
    device = EmulatedClock(spec, time.monotonic_ns(), domain="fpga")
    clock = RtlClock(device)
    try:
        readings = []
        for _ in range(20):
            before = device.now_ticks()
            got = clock.now_ticks()
            after = device.now_ticks()
            assert before <= got <= after  # the middle of a round trip, as calibration needs
            readings.append(got)
        assert readings == sorted(readings)
        regs = Registers(clock.link, clock.bank.registers)
        assert regs.get("answered") == 20  # each answer came from a request to the core
    finally:
        clock.close()


def test_a_link_without_a_bank_is_refused() -> None:
    class Nothing:
        def read(self, addr: int) -> int:
            return 0

        def write(self, addr: int, value: int) -> None:
            pass

    with pytest.raises(ConfigError, match=f"not {MAGIC:#010x}"):
        Registers(Nothing(), [], base=0x1000)


def test_an_rtl_central_storage_needs_a_memory_per_port() -> None:
    with pytest.raises(ConfigError, match="power of two"):
        RtlStorage("centralized", capacity=64, ports=3, recorder=Recorder())


def test_a_second_sample_of_a_probe_in_one_cycle_is_refused_and_counted() -> None:
    """The core has one offer port a probe: a probe that samples twice in one cycle loses the
    second (a contention drop), however many places its hold register has."""
    rtl = RtlStorage("centralized", capacity=16, ports=1, hold=2, recorder=Recorder())
    try:
        port = rtl.port(100)
        assert port.offer(0, 1, 5) is True
        assert port.offer(1, 2, 5) is False
        rtl.settle()
        assert (port.written, port.contention) == (1, 1)
    finally:
        rtl.close()


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events)
@example(events=[(1, 7)] * 40 + [(20, 5)] * 5)
def test_verilator_runs_the_rtl_storage_as_amaranth_does(events: list[tuple[int, int]]) -> None:
    """The same core compiled by Verilator (``hw.verilated``): every sample and count the same
    as Amaranth's simulator gives (the configuration of ``benchmarks/bench_rtl_sim.py``, whose
    library the build cache then shares)."""
    offers = _offers(events)
    got = []
    for sim in ("amaranth", "verilator"):
        store = RtlStorage("centralized", capacity=1024, ports=2, recorder=Recorder(), sim=sim)
        try:
            got.append(_run(_Eight(store), offers))
        finally:
            store.close()
    assert got[0] == got[1]
    assert sum(c[0] for c in got[0]["counts"]) > 0


class _Eight:
    """A storage with eight probes registered (the benchmark's core), of which the test
    drives the first three."""

    def __init__(self, store: RtlStorage) -> None:
        self.store = store
        self.extra = False

    def port(self, probe: int) -> Any:
        port = self.store.port(probe)
        if probe == 100 + PROBES - 1 and not self.extra:
            self.extra = True
            for k in range(PROBES, 8):
                self.store.port(100 + k)
        return port

    def taps(self) -> list[Any]:
        return self.store.taps()

    def settle(self) -> None:
        self.store.settle()
