"""Central probe storage against a cycle-by-cycle reference arbiter; exact accounting."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.probes.storage import CentralStorage, DistributedStorage

Row = tuple[int, int, int]  # (probe, ticks, value)


@dataclass
class Reference:
    """The arbiter restated plainly: every cycle is simulated, one after another."""

    n_probes: int
    ports: int
    hold: int
    capacity: int
    cycle: int = -1
    last: int = -1
    held: list[list[tuple[int, int]]] = field(default_factory=list)
    in_buffer: int = 0
    written: list[Row] = field(default_factory=list)
    contention: list[int] = field(default_factory=list)
    overflow: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.held = [[] for _ in range(self.n_probes)]
        self.contention = [0] * self.n_probes
        self.overflow = [0] * self.n_probes

    def run_cycle(self) -> None:
        rotation = [(self.last + 1 + k) % self.n_probes for k in range(self.n_probes)]
        waiting = [k for k in rotation if self.held[k]]
        for k in waiting[: self.ports]:
            ticks, value = self.held[k].pop(0)
            if self.in_buffer < self.capacity:
                self.in_buffer += 1
                self.written.append((k, ticks, value))
            else:
                self.overflow[k] += 1
            self.last = k

    def offer(self, k: int, ticks: int, value: int, cycle: int) -> bool:
        while self.cycle < cycle:
            self.cycle += 1
            self.run_cycle()
        if len(self.held[k]) < self.hold:
            self.held[k].append((ticks, value))
            return True
        self.contention[k] += 1
        return False

    def drain(self) -> None:
        self.in_buffer = 0

    def settle(self) -> None:
        while any(self.held):
            self.cycle += 1
            self.run_cycle()


# One step: ("offer", probe index, cycle increment, ticks offset, value) or ("drain",).
offers = st.tuples(
    st.just("offer"), st.integers(0, 5), st.sampled_from([0, 0, 0, 1, 1, 2, 5]), st.integers(0, 2)
)
steps = st.lists(st.one_of(offers, st.just(("drain",))), max_size=150)


@settings(max_examples=300, deadline=None)
@given(
    n_probes=st.integers(1, 6),
    ports=st.integers(1, 3),
    hold=st.integers(1, 3),
    capacity=st.sampled_from([1, 2, 4, 8, 64]),
    cycle_ticks=st.integers(1, 3),
    explicit=st.booleans(),
    script=steps,
)
def test_central_storage_matches_reference(
    n_probes: int,
    ports: int,
    hold: int,
    capacity: int,
    cycle_ticks: int,
    explicit: bool,
    script: list[tuple[object, ...]],
) -> None:
    ids = [100 + 3 * k for k in range(n_probes)]  # probe ids are not port indices
    storage = CentralStorage(ports=ports, hold=hold, capacity=capacity, cycle_ticks=cycle_ticks)
    handles = [storage.port(i) for i in ids]
    taps = storage.taps()
    ref = Reference(n_probes, ports, hold, capacity)
    got_rows: list[Row] = []
    got_refused = [0] * n_probes
    cycle, value = 0, 0

    def drain() -> None:
        rec, dropped = taps[0].drain()
        assert dropped == 0
        rows = list(
            zip(rec["probe"].tolist(), rec["ticks"].tolist(), rec["value"].tolist(), strict=True)
        )
        start = len(got_rows)
        got_rows.extend((ids.index(p), t, v) for p, t, v in rows)
        ref.drain()
        assert got_rows == ref.written[: len(got_rows)]
        assert len(got_rows) - start <= capacity
        for k, tap in enumerate(taps[1:]):
            rec, dropped = tap.drain()
            assert len(rec) == 0
            got_refused[k] += dropped

    for step in script:
        if step[0] == "drain":
            drain()
            continue
        _, k, dc, dt = step
        assert isinstance(k, int) and isinstance(dc, int) and isinstance(dt, int)
        k %= n_probes
        cycle += dc
        value += 1
        # Derived cycles: ticks within the cycle; explicit: ticks that disagree with the cycle.
        ticks = cycle * cycle_ticks + dt % cycle_ticks if not explicit else 7 * value
        # Now and then an explicit cycle goes backwards: it counts as the current one.
        c = cycle - 1 if explicit and dt == 2 else cycle
        took = handles[k].offer(ticks, value, cycle=c if explicit else None)
        assert took == ref.offer(k, ticks, value, c)
    storage.settle()
    ref.settle()
    drain()
    assert got_rows == ref.written
    for k, h in enumerate(handles):
        assert h.contention == ref.contention[k]
        assert h.overflow == ref.overflow[k]
        assert h.offered == h.written + h.contention + h.overflow
        assert h.written == sum(1 for r in got_rows if r[0] == k)
        assert got_refused[k] == h.contention + h.overflow
        # Per probe, samples come out in the order they were taken.
        mine = [v for p, _, v in got_rows if p == k]
        assert mine == sorted(mine)


@settings(max_examples=200, deadline=None)
@given(
    n_probes=st.integers(1, 4),
    capacity=st.sampled_from([1, 2, 4, 16]),
    script=st.lists(st.one_of(st.integers(0, 3), st.just(-1)), max_size=120),
)
def test_distributed_storage_refuses_only_when_its_own_buffer_is_full(
    n_probes: int, capacity: int, script: list[int]
) -> None:
    storage = DistributedStorage(capacity=capacity)
    handles = [storage.port(k) for k in range(n_probes)]
    fill = [0] * n_probes
    kept: list[list[int]] = [[] for _ in range(n_probes)]
    refused = [0] * n_probes
    expect_refused = [0] * n_probes
    for value, k in enumerate(script):
        if k < 0:
            for j, tap in enumerate(storage.taps()):
                rec, dropped = tap.drain()
                kept[j].extend(rec["value"].tolist())
                refused[j] += dropped
            fill = [0] * n_probes
            continue
        k %= n_probes
        took = handles[k].offer(value, value)
        assert took == (fill[k] < capacity)
        fill[k] += took
        expect_refused[k] += not took
    storage.settle()
    for j, tap in enumerate(storage.taps()):
        rec, dropped = tap.drain()
        kept[j].extend(rec["value"].tolist())
        refused[j] += dropped
    for k, h in enumerate(handles):
        assert h.contention == 0
        assert refused[k] == expect_refused[k] == h.overflow
        assert (
            h.offered
            == h.written + h.overflow
            == sum(1 for x in script if x >= 0 and x % n_probes == k)
        )
        assert len(kept[k]) == h.written
        assert kept[k] == sorted(kept[k])
