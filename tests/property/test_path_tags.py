"""Path tags in the probe core (``Fifo.keep_tags``): a sample of the items leaving a path's
origin get a tag, each stage thread carries it from what it takes to what it puts, and the tags
leaving and arriving are recorded. Native core and twin side by side: the same tags, records
and carry rule (1:1 stages, generators, aggregators, sources)."""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.core import native, rings
from streamscope.core.records import Kind
from streamscope.core.stream import EOS
from streamscope.transport.ringreader import RingReader

IMPLS = native.implementations()
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEPART_PROBE, ARRIVE_PROBE = 9, 10


class Path:
    """A path a -> b -> c over two FIFOs: tags leave at ``first`` and arrive from ``second``."""

    def __init__(self, m: ModuleType, every: int, *, min_gap: int = 0, cap: int = 1 << 12) -> None:
        self.m = m
        self.clock = m.Clock("manual", start=100)
        self.dmem = rings.anonymous_ring(DEPART_PROBE, int(Kind.DEPART), cap)
        self.amem = rings.anonymous_ring(ARRIVE_PROBE, int(Kind.ARRIVE), cap)
        self.first, self.second = m.Fifo(0), m.Fifo(0)
        for f in (self.first, self.second):
            f.keep_tags()
        self.first.tag_departures(
            m.Ring(self.dmem, self.clock), every, min_gap_ticks=min_gap, seed=7
        )
        self.second.tag_arrivals(m.Ring(self.amem, self.clock))
        m.set_current_tag(0)

    def records(self) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        def rows(mem: Any) -> list[tuple[int, int, int]]:
            r = RingReader(mem).drain().records
            return list(
                zip(r["kind"].tolist(), r["ticks"].tolist(), r["value"].tolist(), strict=True)
            )

        return rows(self.dmem), rows(self.amem)


def _drive(m: ModuleType, plan: list[int], every: int) -> dict[str, Any]:
    """A source puts len(plan) items into ``first``; stage b takes each and puts ``plan[i]``
    items into ``second`` (0: a filter or an aggregator's step, k: a generator); c takes
    everything. Each in its own step, one thread: the thread's tag is reset between roles."""
    p = Path(m, every)
    for i in range(len(plan)):
        p.clock.advance(10)
        p.first.put(i)
    p.first.put(EOS)
    m.set_current_tag(0)  # the source's thread ends; b's begins
    sent = []
    while (item := p.first.get()) is not EOS:
        p.clock.advance(1)
        for _ in range(plan[item]):
            p.second.put(item)
        sent.append(p.first.last_tag)
    p.second.put(EOS)
    m.set_current_tag(0)
    got = []
    while p.second.get() is not EOS:
        got.append(p.second.last_tag)
    depart, arrive = p.records()
    return {
        "sent": sent,
        "got": got,
        "depart": depart,
        "arrive": arrive,
        "every": p.first.tag_every,
    }


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_one_to_one_stage_hands_each_tag_on(impl: str) -> None:
    out = _drive(IMPLS[impl], [1] * 50, every=1)
    assert out["got"] == out["sent"]
    assert all(t >> 40 == DEPART_PROBE for t in out["sent"])
    assert len(set(out["sent"])) == 50  # every item tagged, each tag new
    assert [v for _, _, v in out["depart"]] == out["sent"]
    assert [v for _, _, v in out["arrive"]] == out["got"]
    assert {k for k, _, _ in out["depart"]} == {int(Kind.DEPART)}
    assert {k for k, _, _ in out["arrive"]} == {int(Kind.ARRIVE)}


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_generators_outputs_all_carry_their_inputs_tag(impl: str) -> None:
    out = _drive(IMPLS[impl], [3, 0, 2, 1], every=1)
    s = out["sent"]
    # item 1 made nothing: its tag rides on the next output (item 2's), the oldest taken since
    # the stage last put; item 2's own tag is absorbed.
    assert out["got"] == [s[0], s[0], s[0], s[1], s[1], s[3]]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_an_aggregators_output_carries_the_oldest_tag_it_took(impl: str) -> None:
    plan = [0, 0, 0, 1] * 5  # one output per four inputs
    out = _drive(IMPLS[impl], plan, every=1)
    s = out["sent"]
    assert out["got"] == [s[i] for i in range(0, 20, 4)]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_one_item_in_about_every_is_tagged_with_jitter(impl: str) -> None:
    out = _drive(IMPLS[impl], [1] * 5000, every=10)
    tagged = [t for t in out["sent"] if t]
    assert 450 <= len(tagged) <= 550
    idx = [i for i, t in enumerate(out["sent"]) if t]
    spacing = {b - a for a, b in zip(idx, idx[1:], strict=False)}
    assert len(spacing) > 5  # jittered: a round-robin split after it cannot alias it
    assert [t & ((1 << 40) - 1) for t in tagged] == list(range(1, len(tagged) + 1))
    assert out["got"] == out["sent"]


def test_native_and_twin_give_the_same_tags_and_records() -> None:
    if "native" not in IMPLS:
        pytest.skip("the native core was not built")
    a = _drive(IMPLS["native"], [1, 0, 2, 1, 3] * 200, every=7)
    b = _drive(IMPLS["python"], [1, 0, 2, 1, 3] * 200, every=7)
    assert a == b


@pytest.mark.parametrize("impl", sorted(IMPLS))
@given(gap=st.integers(1, 50), min_gap=st.integers(100, 400))
@SETTINGS
def test_the_sampler_keeps_tags_min_gap_apart_on_average(impl: str, gap: int, min_gap: int) -> None:
    m = IMPLS[impl]
    p = Path(m, 1, min_gap=min_gap, cap=1 << 17)
    for i in range(3 * 64 * min_gap // gap + 2000):  # three of the sampler's windows, and more
        p.clock.advance(gap)
        p.first.put(i)
    depart, _ = p.records()
    ticks = np.array([t for _, t, _ in depart])
    # Settled, over the last windows: about one tag per min_gap, at most one per min_gap / 2
    # (a window allows 64, the rate halves past that) and far from every item.
    last = ticks[-20:]
    rate = (len(last) - 1) / (last[-1] - last[0])
    assert rate <= 2.0 / min_gap, (rate * min_gap, p.first.tag_every)
    assert rate >= 0.2 / min_gap, (rate * min_gap, p.first.tag_every)


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_each_thread_carries_its_own_tag(impl: str) -> None:
    m = IMPLS[impl]
    p = Path(m, 1)
    for i in range(2):
        p.first.put(i)
    got: dict[str, int] = {}

    def stage(name: str) -> None:
        p.first.get()
        got[name] = m.current_tag()

    threads = [threading.Thread(target=stage, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
        t.join()
    assert sorted(got.values()) == sorted({got["x"], got["y"]}) and got["x"] != got["y"]
    assert m.current_tag() == 0  # this thread took nothing


@pytest.mark.parametrize("impl", sorted(IMPLS))
@given(gaps=st.lists(st.integers(1, 100), min_size=8, max_size=40), every=st.integers(1, 4))
@SETTINGS
def test_a_tapped_end_and_its_tag_share_one_clock_reading(
    impl: str, gaps: list[int], every: int
) -> None:
    """Where the origin's tail and the end's head are tapped, a tag leaves and arrives at the
    ticks of the PUT and GET records of the same item (one clock read for both)."""
    m = IMPLS[impl]
    p = Path(m, every)
    tail = rings.anonymous_ring(11, int(Kind.PUT), 1 << 10)
    head = rings.anonymous_ring(12, int(Kind.GET), 1 << 10)
    p.first.tail = m.Ring(tail, p.clock)
    p.second.head = m.Ring(head, p.clock)
    for i, gap in enumerate(gaps):
        p.clock.advance(gap)
        p.first.put(i)
    m.set_current_tag(0)
    for _ in gaps:
        p.clock.advance(3)
        p.second.put(p.first.get())
    m.set_current_tag(0)
    for _ in gaps:
        p.clock.advance(5)
        p.second.get()
    depart, arrive = p.records()
    puts = RingReader(tail).drain().records
    gets = RingReader(head).drain().records
    assert len(puts) == len(gets) == len(gaps)  # every item still recorded at both ends
    put_at = dict(zip(puts["value"].tolist(), puts["ticks"].tolist(), strict=True))
    get_at = dict(zip(gets["value"].tolist(), gets["ticks"].tolist(), strict=True))
    assert depart and len(depart) == len(arrive)
    for (_, t_dep, tag), (_, t_arr, tag2) in zip(depart, arrive, strict=True):
        assert tag == tag2
        assert t_dep in put_at.values() and t_arr in get_at.values()
    seqs = [i + 1 for i in range(len(gaps))]
    tagged_seq = [s for s in seqs if put_at[s] in {t for _, t, _ in depart}]
    assert [get_at[s] for s in tagged_seq] == [t for _, t, _ in arrive]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_tags_need_keep_tags(impl: str) -> None:
    m = IMPLS[impl]
    f = m.Fifo(4)
    ring = m.Ring(rings.anonymous_ring(1, int(Kind.DEPART), 4), m.Clock("manual", start=0))
    with pytest.raises(RuntimeError, match="keep_tags"):
        f.tag_departures(ring, 10)
    with pytest.raises(RuntimeError, match="keep_tags"):
        f.tag_arrivals(ring)
    f.keep_tags()
    with pytest.raises(ValueError, match="every >= 1"):
        f.tag_departures(ring, 0)


@pytest.mark.parametrize("impl", sorted(IMPLS))
@given(n=st.integers(1, 30), take=st.integers(0, 30))
@SETTINGS
def test_a_batch_taken_with_its_stamps_and_tags_keeps_each_items_own(
    impl: str, n: int, take: int
) -> None:
    """``take_stamped_tagged`` (a link between hosts whose items carry both their insertion
    ticks and their path tags): each item with its own, as ``take_stamped`` and
    ``take_tagged`` give them apart."""
    m = IMPLS[impl]
    clock = m.Clock("manual", start=50)
    f = m.Fifo(0)
    f.keep_stamps()
    f.keep_tags()
    f.tail = m.Ring(rings.anonymous_ring(3, int(Kind.PUT), 1 << 7), clock)
    for i in range(n):
        clock.advance(7)
        m.set_current_tag(1000 + i if i % 3 else 0)
        f.put(i)
    m.set_current_tag(0)
    take = min(take, n)
    items, ticks, tags = f.take_stamped_tagged(take)
    assert items == list(range(take))
    assert ticks == [50 + 7 * (i + 1) for i in range(take)]
    assert tags == [1000 + i if i % 3 else 0 for i in range(take)]
    rest, rest_ticks = f.take_stamped(n - take)
    assert rest == list(range(take, n)) and rest_ticks == [50 + 7 * (i + 1) for i in range(take, n)]
    with pytest.raises(ValueError, match="take_stamped_tagged"):
        f.take_stamped_tagged(1)
    g = m.Fifo(0)
    g.keep_tags()
    with pytest.raises(RuntimeError, match="keep_stamps"):
        g.take_stamped_tagged(0)
