"""The monitor's drain of every ring of a run: shares while the run goes on, a common frontier
in time at the end, and a budget that is never exceeded."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from streamscope.core.records import Kind
from streamscope.monitor.ringset import RingSet
from streamscope.probes.taps import Recorder


def _rings(tmp_path: Path, spans: dict[int, range]) -> tuple[RingSet, Recorder]:
    """One ring per probe id, holding one record per tick of its span (value = ticks)."""
    rec = Recorder(str(tmp_path), capacity=1024)
    for probe, span in spans.items():
        tap = rec.tap(probe, Kind.PUT)
        for t in span:
            assert tap.ring.record_at(t, t)
    topology: Any = SimpleNamespace(probes=[])
    rs = RingSet(str(tmp_path), topology)
    assert rs.scan() == len(spans)
    return rs, rec


def _taken(drain: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for part in drain.records.get("host", []):
        for p, v in zip(part["probe"].tolist(), part["value"].tolist(), strict=True):
            out.setdefault(p, []).append(v)
    return out


def test_over_budget_the_rings_are_drained_up_to_a_common_frontier(tmp_path: Path) -> None:
    # Ring 1 holds ticks 0..599, ring 2 ticks 500..599: taking ring 2's records early would
    # only make them wait in the monitor until ring 1 catches up.
    rs, _ = _rings(tmp_path, {1: range(600), 2: range(500, 600)})
    seen: dict[int, list[int]] = {1: [], 2: []}
    first: dict[int, int] = {}
    cycle = 0
    while rs.pending():
        d = rs.drain(200, lambda _dom, ticks: ticks)
        assert d.n_records <= 200
        got = _taken(d)
        newest = max(v for vs in got.values() for v in vs)
        if "host" in d.left:
            assert newest <= d.left["host"]  # nothing taken lies beyond what is left
        for p, vs in got.items():
            seen[p].extend(vs)
            first.setdefault(p, cycle)
        cycle += 1
        assert cycle < 50
    assert seen[1] == list(range(600)) and seen[2] == list(range(500, 600))
    assert first[2] > first[1] == 0  # ring 2 waited for the frontier to reach it
    assert cycle == 4  # and the budget was used, not only each ring's share


def test_without_a_clock_each_ring_gets_its_share_then_the_rest(tmp_path: Path) -> None:
    rs, _ = _rings(tmp_path, {1: range(600), 2: range(500, 600), 3: range(10)})
    d = rs.drain(300)
    got = _taken(d)
    assert d.n_records == 300
    assert len(got[3]) == 10 and len(got[2]) == 100  # their whole share fits
    assert got[1] == list(range(190))  # the share left over, oldest first
    assert d.left["host"] == 190


def test_an_uncalibrated_domain_gets_its_share_and_holds_no_one_back(tmp_path: Path) -> None:
    rs, _ = _rings(tmp_path, {1: range(600), 2: range(1000, 1600)})
    d = rs.drain(200, lambda _dom, ticks: None)
    got = _taken(d)
    assert len(got[1]) == 100 and len(got[2]) == 100


def test_a_ring_its_writer_closed_is_drained_to_its_end_then_removed(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path), capacity=16)
    kept, dropped = rec.tap(1, Kind.PUT), rec.tap(2, Kind.PUT)
    topology: Any = SimpleNamespace(probes=[])
    rs = RingSet(str(tmp_path), topology)
    assert rs.scan() == 2
    for v in (1, 2, 3):
        dropped.ring.record(v)
    kept.ring.record(9)
    rec.retire(dropped)
    assert dropped not in rec.taps and kept in rec.taps
    got = _taken(rs.drain())
    assert got == {1: [9], 2: [1, 2, 3]}  # everything it recorded before it was closed
    assert rs.take_closed() == [2] and rs.take_closed() == []
    assert len(list(tmp_path.glob("*.ring"))) == 1 and rs.scan() == 1
    assert rs.costs()[2].events == 3  # what it cost is still counted


def test_astir_marks_the_rings_that_hold_anything_alike_in_both_cores(tmp_path: Path) -> None:
    """The one pass over every ring's header that spares the monitor a Python step per idle
    ring: records waiting, a ring closed, records refused, a register, or no address."""
    import numpy as np

    from streamscope.core.native import implementations

    rec = Recorder(str(tmp_path), capacity=4)
    _idle, waiting, closed, full = (rec.tap(p, Kind.PUT) for p in (1, 2, 3, 4))
    drained = rec.tap(5, Kind.PUT)
    assert waiting.ring.record_at(1, 1) and drained.ring.record_at(1, 1)
    for t in range(5):
        full.ring.record_at(t, t)  # the fifth is refused
    rec.retire(closed)
    rs = RingSet(str(tmp_path), SimpleNamespace(probes=[]))  # type: ignore[arg-type]
    rs.scan()
    by_probe = {r.reader.probe: r for r in rs._rings.values()}
    by_probe[5].reader.drain()
    order = [by_probe[p] for p in (1, 2, 3, 4, 5)]
    addrs = np.array([r.reader.address for r in order] + [0], dtype=np.uint64)
    assert all(addrs[:5])
    for name, impl in implementations().items():
        flags = np.full(len(addrs), 7, dtype=np.uint8)
        assert impl.astir(addrs, flags) == 4, name
        assert flags.tolist() == [0, 1, 1, 1, 0, 1], name


def test_many_idle_rings_are_passed_over_and_none_is_missed(tmp_path: Path) -> None:
    """200 rings, idle after their first drain: a drain looks only at those that hold anything,
    and a record written to any of them later is taken by the next drain."""
    rs, rec = _rings(tmp_path, {p: range(1) for p in range(1, 201)})
    assert sum(len(v) for v in _taken(rs.drain()).values()) == 200
    looked: list[int] = []
    real = rs._astir

    def spy() -> Any:
        got = real()
        looked.append(len(got))
        return got

    rs._astir = spy  # type: ignore[method-assign]
    assert rs.drain().n_records == 0
    taps = {t.probe: t for t in rec.taps}
    for p in (7, 150):
        assert taps[p].ring.record_at(10, p)
    assert _taken(rs.drain()) == {7: [7], 150: [150]}
    assert looked == [0, 2]


def test_rings_that_go_leave_the_others_found(tmp_path: Path) -> None:
    """Rings closed and retired among 200 (each leaves its place to the last ring): every
    ring left is still looked at when it holds a record, and only then."""
    rs, rec = _rings(tmp_path, {p: range(1) for p in range(1, 201)})
    rs.drain()
    taps = {t.probe: t for t in rec.taps}
    gone = [1, 50, 51, 199, 200, 120]
    for p in gone:
        rec.retire(taps.pop(p))
    assert rs.drain().n_records == 0 and sorted(rs.take_closed()) == sorted(gone)
    assert sorted(r.index for r in rs._rings.values()) == list(range(194))
    for p, tap in taps.items():
        assert tap.ring.record_at(20, p)
    assert _taken(rs.drain()) == {p: [p] for p in taps}
    assert rs.drain().n_records == 0


def test_declarations_are_journal_lines_read_before_the_rings_after_them(
    tmp_path: Path, capsys: Any
) -> None:
    """A probe declared during the run is a line of the journal (no file of its own), read
    back by the monitor before the ring that follows it and by ``declared``; a line that is
    not one is said and passed over. The journal's descriptor is closed with the session."""
    from streamscope.core import rings
    from streamscope.core.topology import ChannelInfo, ProbeInfo, StageInfo, Topology

    ch = ChannelInfo("a -> b", "a", "b", 8, "queue")
    probe = ProbeInfo(70, "tail", ch.name, domain="dev")
    seen: list[Topology] = []
    rs = RingSet(str(tmp_path), Topology("t"), on_declare=lambda *found: seen.extend(found))
    rings.declare(tmp_path, Topology("", channels=(ch,), probes=(probe,)))
    rings.journal(tmp_path, f"{rings.DECLARED} {{not json")
    rec = Recorder(str(tmp_path), capacity=16)
    rec.tap(70, Kind.PUT)
    assert rs.scan() == 1
    assert [(t.channels, t.probes) for t in seen] == [((ch,), (probe,))]
    assert [r.domain for r in rs._rings.values()] == ["dev"]  # the declaration came first
    assert "not a probe declaration" in capsys.readouterr().out
    assert [n for n in os.listdir(tmp_path) if not n.endswith(rings.SUFFIX)] == [rings.JOURNAL]
    assert rings.declared(tmp_path, Topology("t")).channels == (ch,)
    assert rings.declares(tmp_path, Topology("t")) == (False, True)  # a channel, no stage
    rings.declare(tmp_path, Topology("", stages=(StageInfo("a", "main", "source"),)))
    assert rings.declares(tmp_path, Topology("t")) == (True, True)
    fds = len(os.listdir("/proc/self/fd"))
    rings.close_journal()
    assert len(os.listdir("/proc/self/fd")) == fds - 1


def test_rings_made_by_the_slab_are_read_and_their_slab_goes_with_its_last_ring(
    tmp_path: Path,
) -> None:
    """A program's rings, many to a file (``core.slabs``): 20 taps make two slabs of 16 slots,
    each ring read whole by the monitor as a ring of its own file is; a slab's file is removed
    once every slot of it was retired and drained, not before; a slot starts a page."""
    from streamscope.core.slabs import SLAB_RINGS, SLAB_SUFFIX, slot_bytes

    rec = Recorder(str(tmp_path), capacity=16, slab=True)
    taps = [rec.tap(100 + i, Kind.PUT) for i in range(SLAB_RINGS + 4)]
    for i, tap in enumerate(taps):
        for v in range(1, i % 5 + 2):
            assert tap.ring.record_at(v, 10 * i + v)

    def made(p: Path) -> int:  # a slab's serial in its process
        return int(p.stem.rpartition("-")[2])

    slabs = sorted(tmp_path.glob(f"*{SLAB_SUFFIX}"), key=made)
    assert len(slabs) == 2 and not list(tmp_path.glob("*.ring"))
    assert {p.stat().st_size for p in slabs} == {SLAB_RINGS * slot_bytes(16)}
    assert slot_bytes(16) % 4096 == 0
    rs = RingSet(str(tmp_path), SimpleNamespace(probes=[]))  # type: ignore[arg-type]
    assert rs.scan() == SLAB_RINGS + 4
    got = _taken(rs.drain())
    assert got == {100 + i: [10 * i + v for v in range(1, i % 5 + 2)] for i in range(len(taps))}
    first, rest = taps[:SLAB_RINGS], taps[SLAB_RINGS:]
    for tap in first[:-1]:
        rec.retire(tap)
    rest[0].ring.record_at(9, 7)
    rec.retire(rest[0])
    assert _taken(rs.drain()) == {100 + SLAB_RINGS: [7]}
    assert len(list(tmp_path.glob(f"*{SLAB_SUFFIX}"))) == 2  # a slot of each still open
    first[-1].ring.record_at(9, 8)
    rec.retire(first[-1])
    assert _taken(rs.drain()) == {100 + SLAB_RINGS - 1: [8]}  # its last record first
    assert sorted(tmp_path.glob(f"*{SLAB_SUFFIX}")) == slabs[1:]
    assert sorted(rs.take_closed()) == sorted(t.probe for t in [*first, rest[0]])
    assert rs.scan() == len(rest) - 1
