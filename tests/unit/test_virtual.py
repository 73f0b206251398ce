"""The monitor's virtual-queue reducer on synthetic sub-queue records (both sides on the host)."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamscope.aggregate.points import ScalarPoint
from streamscope.aggregate.specs import Mean
from streamscope.aggregate.subqueue import SubQueueFrames
from streamscope.core.records import State
from streamscope.core.topology import ChannelInfo, Topology
from streamscope.monitor.virtual import VirtualQueue, frame_inputs
from streamscope.timebase.domains import Domains

FRAME = 1_000_000
CH = ChannelInfo("a -> b", "a", "b", 4096, "link", 4, 50.0, 0.0, None)


def _vq(with_states: bool) -> tuple[VirtualQueue, dict[str, list[dict[str, Any]]]]:
    tables: dict[str, list[dict[str, Any]]] = {}
    sides = {"tail": ("host", 1, 2, 5 if with_states else 0), "head": ("host", 3, 4, 0)}
    vq = VirtualQueue(CH, 0, [(7, (Mean(),))], FRAME, sides,
                      lambda rows: tables.setdefault(rows.table, []).append(dict(rows.columns)))  # fmt: skip
    return vq, tables


def _feed(vq: VirtualQueue, with_states: bool, n: int = 9000) -> None:
    """Insertions every 100 ns, of which the producer spent 90 blocked on a full buffer (so it
    produces one item per 10 ns of work); the bus takes them 4 at a time as soon as the 4th is
    in; the consumer then removes them one per 100 ns, back to back."""
    t_in, seq, last = _tail(vq, n)
    vq.add_records("head", "insert", last + 2, seq)
    vq.add_records("head", "remove", last + 3 + 100 * (np.arange(n) % 4), seq)
    if with_states:
        # busy 10 ns after each insertion, then blocked on output until the next one
        st_t = np.stack([t_in, t_in + 10], axis=1).ravel()
        st_v = np.tile([int(State.BUSY), int(State.BLOCKED_OUT)], n)
        vq.add_records("tail", "state", st_t, st_v.astype(np.int64))


def _tail(vq: VirtualQueue, n: int) -> tuple[Any, Any, Any]:
    """``_feed``'s tail buffer: insertion times, sequence numbers, and each item's batch's last
    insertion (the bus takes it then)."""
    t_in = np.arange(1, n + 1, dtype=np.int64) * 100
    seq = np.arange(1, n + 1, dtype=np.int64)
    last = t_in[(np.arange(n) // 4) * 4 + 3]  # the insertion that completes each item's batch
    vq.add_records("tail", "insert", t_in, seq)
    vq.add_records("tail", "remove", last + 1, seq)
    return t_in, seq, last


def _run(with_states: bool) -> tuple[float, dict[str, list[dict[str, Any]]]]:
    vq, tables = _vq(with_states)
    _feed(vq, with_states)
    domains = Domains(Topology("t"))
    domains.start(0)
    results = vq.advance(FRAME, domains)
    results += vq.finish(FRAME, domains, None)
    (r,) = [r for r in results if r.frame == 0]
    assert r.query_id == 7 and r.target == "a -> b"
    mean = next(p.value for p in r.points if isinstance(p, ScalarPoint) and p.stat == "mean")
    return mean, tables


def test_production_times_replace_inter_insertion_times_when_states_are_watched() -> None:
    without, tables = _run(False)
    with_states, tables_states = _run(True)
    (frame_rows,) = tables["vq_frame"][:1]
    (frame_rows_states,) = tables_states["vq_frame"][:1]
    # The renewal model (i.i.d. gaps): without states the arrivals look like one per 100 ns
    # against a 100 ns server; with them, one per 10 ns of production: the model sees the
    # producer's real pace and a long queue.
    renewal, renewal_states = frame_rows["renewal_mean"][0], frame_rows_states["renewal_mean"][0]
    assert renewal_states > 5 * max(renewal, 1.0)
    # The model used places the insertions where the profile measured them (one per 100 ns,
    # as they happened): the production gaps only space them inside a sub-window.
    assert frame_rows["arrivals"] == frame_rows_states["arrivals"] == ["profile"]
    assert abs(with_states - without) < 0.05 * without
    assert frame_rows["verdict"][0] in ("consistent", "rejected")
    assert tables["virtual_queue"][0]["frames"] == [1]


def test_frames_without_gaps_or_departures_are_still_modelled() -> None:
    """Items held in the tail buffer (fewer than a transfer, no timeout) and nothing reaching
    the consumer: frame 0 has three insertions, frame 1 none. Both are modelled: the queue
    holds what was inserted (no service time is needed, since nothing is served)."""
    vq, _ = _vq(False)
    t = np.array([100, 200_000, 300_000], dtype=np.int64)
    vq.add_records("tail", "insert", t, np.arange(1, 4, dtype=np.int64))
    domains = Domains(Topology("t"))
    domains.start(0)
    results = vq.advance(2 * FRAME, domains)
    results += vq.finish(2 * FRAME, domains, None)
    means = {r.frame: next(p.value for p in r.points if getattr(p, "stat", "") == "mean")
             for r in results}  # fmt: skip
    assert means[1] is not None and abs(means[1] - 3.0) < 1e-9  # held all through frame 1
    assert means[0] is not None and means[0] > 0  # sampled gaps: a model, not a replay


def _bursts(vq: VirtualQueue, frames: int) -> None:
    """Periodic bursts: 25 items 400 ns apart at the start of every 100 us; the bus takes 4
    at a time as the 4th is in (the last of a burst at once: as if by its timeout); the consumer
    serves 1 us each, back to back."""
    start = np.repeat(np.arange(frames * 10) * 100_000 + 1_000, 25)
    t_in = start + 400 * np.tile(np.arange(25), frames * 10)
    n = t_in.size
    seq = np.arange(1, n + 1, dtype=np.int64)
    k = np.arange(n)
    last = np.minimum((k // 25) * 25 + 24, (k // 4) * 4 + 3)
    sent = t_in[np.minimum(last, n - 1)] + 1
    removed = np.empty(n, dtype=np.int64)
    free = 0
    for i in range(n):  # test-only: the consumer's removals, one service after another
        removed[i] = max(int(sent[i]) + 1, free)
        free = int(removed[i]) + 1_000
    vq.add_records("tail", "insert", t_in.astype(np.int64), seq)
    vq.add_records("tail", "remove", sent.astype(np.int64), seq)
    vq.add_records("head", "insert", sent.astype(np.int64) + 1, seq)
    vq.add_records("head", "remove", removed, seq)


def _columns(parts: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """One table's column lists, written in parts (one per frame), joined."""
    return {k: [x for p in parts for x in p[k]] for k in parts[0]}


def _frames_of(with_profile: bool) -> dict[str, list[dict[str, Any]]]:
    vq, tables = _vq(False)
    if not with_profile:  # a producer's side whose summaries carry no profile (an older device)
        for side in vq.sides.values():
            side.frames = SubQueueFrames(1.0)
            side.frames.set_grid(0.0, float(FRAME))
    _bursts(vq, 3)
    domains = Domains(Topology("t"))
    domains.start(0)
    vq.advance(3 * FRAME, domains)
    vq.finish(3 * FRAME, domains, None)
    return tables


def test_the_profile_is_the_model_used_and_the_renewal_model_is_checked_beside_it() -> None:
    tables = _frames_of(True)
    rows = _columns(tables["vq_frame"])
    assert rows["arrivals"] == ["profile"] * 3
    assert all(v in ("consistent", "rejected") for v in rows["verdict"])
    # Bursts of one size at one period: i.i.d. gaps cannot make them, and the test says so.
    assert all(p is not None and p < 0.025 for p in rows["dependence_p"])
    assert rows["renewal_verdict"] == ["rejected"] * 3
    assert all(m is not None for m in rows["renewal_mean"])
    (run,) = tables["virtual_queue"]
    assert run["renewal_verdict"] == ["rejected"] and run["dependence_p"][0] < 0.025
    series = {s for t in tables["vq_level"] for s in t["series"]}
    assert {"predicted", "renewal", "ideal", "tail", "head"} <= series


def test_without_a_profile_the_renewal_model_is_used() -> None:
    tables = _frames_of(False)
    rows = _columns(tables["vq_frame"])
    assert rows["arrivals"] == ["renewal"] * 3
    assert rows["dependence_p"] == [None] * 3
    assert rows["renewal_mean"] == rows["predicted_mean"]
    assert rows["renewal_verdict"] == rows["verdict"]
    (run,) = tables["virtual_queue"]
    assert run["dependence_p"] == [None]
    assert "renewal" not in {s for t in tables["vq_level"] for s in t["series"]}


def test_a_frame_its_producer_stopped_in_is_estimated_over_the_whole_frame() -> None:
    """A device's source puts its last item 30 ms into a 500 ms frame, then its side ends
    (its process is done); the host drains the link for the rest of the frame and the run goes
    on. The frame is modelled over the whole of it, its insertions ending with the last one
    measured (over the producer's 30 ms alone, that level was reported for the whole frame:
    64 items where the truth was 22.5), each side checked over what it measured."""
    frame, stop = 500_000_000, 30_000_000
    t_in = np.arange(1, 31, dtype=np.int64) * 1_000_000  # an item a ms, to 30 ms
    seq = np.arange(1, 31, dtype=np.int64)
    tail = SubQueueFrames(1.0)
    tail.set_grid(0.0, frame)
    tail.add_insertions(t_in, seq)
    tail.add_removals(t_in + 1, seq)  # into the bus at once
    (tail_frame,) = tail.finish(stop + 1)  # the source's process ended
    head = SubQueueFrames(1.0)
    head.set_grid(0.0, frame)
    head.add_insertions(t_in + 5_000_000, seq)  # delivered 5 ms later
    head.add_removals(t_in + 5_000_000 + np.arange(1, 31) * 3_000_000, seq)  # 3 ms each
    (head_frame,) = head.close_until(frame)
    got = frame_inputs(tail_frame, head_frame, (1.0, 1.0), frame, False, False, False)
    assert got is not None
    assert got.span == frame and got.final  # the whole frame, the model draining the link
    assert got.windows == (stop + 1, frame)  # each side checked over what it measured
    # The run's first frame is not one its producer stopped in (it started late in it).
    first = frame_inputs(tail_frame, head_frame, (1.0, 1.0), frame, False, False, True)
    assert first is not None and first.span == stop + 1 and not first.final


class _DeviceClock(Domains):
    """The device's ticks are the host's ns, its bounds ``halfwidth`` either side (infinite: no
    clock burst pins it over the frame, as past a step inside the run's last burst)."""

    def __init__(self, halfwidth: float) -> None:
        super().__init__(Topology("t"))
        self.start(0)
        self.halfwidth = halfwidth

    def to_ns(self, domain: str, ticks: Any) -> tuple[Any, float]:
        return np.asarray(ticks, dtype=np.int64), self.halfwidth


def _device_frame(halfwidth: float) -> dict[str, Any]:
    """One frame of ``_feed``'s items, its head buffer reduced on a device (summaries only)."""
    tables: dict[str, list[dict[str, Any]]] = {}
    sides = {"tail": ("host", 1, 2, 0), "head": ("dev", 3, 4, 0)}
    vq = VirtualQueue(CH, 0, [(7, (Mean(),))], FRAME, sides,
                      lambda rows: tables.setdefault(rows.table, []).append(dict(rows.columns)))  # fmt: skip
    host, _ = _vq(False)
    _feed(host, False)
    _tail(vq, 9000)
    head = host.sides["head"].frames
    assert head is not None
    vq.add_summaries("head", head.finish(FRAME))
    clock = _DeviceClock(halfwidth)
    vq.advance(FRAME, clock)
    vq.finish(FRAME, clock, None)
    return {k: v[0] for k, v in tables["vq_frame"][0].items()}


def test_a_frame_whose_device_clock_is_unbounded_gets_no_verdict() -> None:
    """With the device's frame edges known to 1 us the frame is checked; with its bounds open
    any discrepancy could be the clock's: no verdict (not 'consistent' by an infinite
    threshold), and it says why."""
    bounded = _device_frame(1000.0)
    assert bounded["verdict"] in ("consistent", "rejected")
    assert 0.0 < bounded["clock_bias_items"] < bounded["threshold_items"]
    unbounded = _device_frame(float("inf"))
    assert unbounded["verdict"] is None and unbounded["decided_by"] == "unbounded"
    assert unbounded["threshold_items"] is None and unbounded["clock_bias_items"] is None
    assert unbounded["predicted_mean"] == bounded["predicted_mean"]
