"""Latency along a path (``latency(SRC ~> DST)``), item by item, against the application's
own stamps: a four-stage pipeline of threads whose third stage is a generator (two outputs per
input), its source stamping each item as it makes it and its sink noting when each arrives."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from oracles import benchmark
from streamscope.aggregate.points import QuantilesPoint, ScalarPoint
from streamscope.aggregate.sketch import SKETCH_RELATIVE_ACCURACY
from streamscope.core.errors import QueryError
from streamscope.pipeline.describe.resources import Resource


class Source:
    """Paced (one item every ``gap_ns``), so that it never waits for room: the stamp it gives
    an item (the true host time, wherever it runs) is when the item leaves it."""

    def __init__(self, n: int, gap_ns: int = 700_000, handed: Path | None = None) -> None:
        self.n, self.gap_ns, self.handed = n, gap_ns, handed

    def generate(self):  # type: ignore[no-untyped-def]
        """With ``handed`` (a file), when each item's put was done (the generator resumed)
        noted there, wherever the source runs."""
        handed = np.zeros(self.n, dtype=np.int64)
        deadline = time.monotonic_ns()
        for i in range(self.n):
            deadline += self.gap_ns
            while time.monotonic_ns() < deadline:
                time.sleep(0.00005)
            yield (i, time.monotonic_ns())  # the item's own departure stamp
            handed[i] = time.monotonic_ns()
        if self.handed is not None:
            np.save(self.handed, handed)


class Work:
    """Exponential service (mean ``mean_ns``), seeded: a sleep, which lets the interpreter lock
    go. (Code that held it would make the other threads wait for it between their own stamps
    and the taps beside them, now and then a whole switch interval beside a busy core: the
    application's stamps, the truth here, would then be late by what no tap can see.)"""

    def __init__(self, mean_ns: float = 400_000) -> None:
        self.rng = np.random.default_rng(3)
        self.mean_ns = mean_ns

    def process(self, item: tuple[int, int]) -> tuple[int, int]:
        time.sleep(self.rng.exponential(self.mean_ns) / 1e9)
        return item


def twice(item: tuple[int, int]):  # type: ignore[no-untyped-def]
    yield item
    yield item


class Sink:
    """Notes when each item arrives (``latencies``: from the source's stamp), which item it is,
    and when it was done with the one before (``ready``: its next get began after that)."""

    def __init__(self) -> None:
        self.latencies: list[int] = []
        self.arrived: list[int] = []
        self.items: list[int] = []
        self.ready: list[int] = []
        self._done = 0

    def process(self, item: tuple[int, int]) -> None:
        now = time.monotonic_ns()
        self.latencies.append(now - item[1])
        self.arrived.append(now)
        self.items.append(item[0])
        self.ready.append(self._done)
        self._done = time.monotonic_ns()


def stamped_twice(before: list[int]):  # type: ignore[no-untyped-def]
    """``twice``, noting in ``before`` the moment before each output is handed on (its put
    comes after: the sink's get of it, later still)."""

    def twice(item: tuple[int, int]):  # type: ignore[no-untyped-def]
        for _ in range(2):
            before.append(time.monotonic_ns())
            yield item

    return twice


def _points(points: tuple[object, ...]) -> dict[str, float | None]:
    got: dict[str, float | None] = {}
    for pt in points:
        if isinstance(pt, ScalarPoint):
            got[pt.stat] = pt.value
        elif isinstance(pt, QuantilesPoint):
            got |= {f"p{round(q * 100)}": v for q, v in zip(pt.qs, pt.values, strict=True)}
    return got


def _pipeline(
    sink: Sink, n: int, where: Resource | str = "thread", src: Source | None = None,
    twice_: object = twice,
) -> ss.Pipeline:  # fmt: skip
    """Source -> work -> twice (a generator) -> sink; ``where``: the work's resource."""
    p = ss.Pipeline("path")
    p.add("src", src if src is not None else Source(n))
    p.add("work", Work(), resource=where)
    p.add("twice", twice_)
    p.add("sink", sink)
    p.connect("src", "work", capacity=64)
    p.connect("work", "twice", capacity=64)
    p.connect("twice", "sink", capacity=64)
    return p


def _against_stamps(tmp_path: Path, where: Resource | str) -> None:
    """Run the four stages (``where``: the work's resource) and hold the run's path latency to
    the program's stamps. Each item's path latency lies between what the stamps around its two
    ends allow: its put into ``src -> work`` between the source's stamp and the source's
    resuming after it; its get from ``twice -> sink`` after both ``twice``'s stamp before
    handing it on and the sink's being done with the item before, and before the sink's stamp
    on arrival. A busy core may hold a thread back between a stamp and the tap beside it (2.4
    ms once, at the p99), so the truth is that interval, not either stamp. The run's mean and
    p99 lie in the range those intervals give them (quantiles of per-item bounds bound the
    quantile), within the sketch's relative accuracy."""
    sink, before = Sink(), []
    handed = tmp_path / "handed.npy"
    out = tmp_path / "path.duckdb"
    q = "latency(src ~> sink): mean, p50, p99, count every 30s"
    src = Source(2000, handed=handed)
    res = ss.run(
        _pipeline(sink, 2000, where, src, stamped_twice(before)), [q], ss.RunOptions(out=out)
    )
    assert res.status == "completed", res.error
    items = np.array(sink.items)
    assert items.size == len(before) == 4000
    source_stamp = np.array(sink.arrived) - np.array(sink.latencies)
    earliest = np.maximum(np.array(sink.ready), np.array(before)) - np.load(handed)[items]
    latest = np.array(sink.arrived) - source_stamp
    with ss.load(out) as run:
        (frame,) = run.results(0, "src ~> sink")
    got = _points(frame.points)
    print(got, f"truth: mean in [{earliest.mean():.0f}, {latest.mean():.0f}] ns, "
          f"p99 in [{np.percentile(earliest, 99):.0f}, {np.percentile(latest, 99):.0f}] ns")  # fmt: skip
    # Every item (the source's 1,400 a second are fewer than the sampler allows), each arrival
    # one sample (the generator's two outputs: two).
    assert got["count"] == items.size
    assert got["mean"] is not None and earliest.mean() <= got["mean"] <= latest.mean()
    acc = SKETCH_RELATIVE_ACCURACY
    assert got["p99"] is not None
    assert np.percentile(earliest, 99) * (1 - acc) <= got["p99"]
    assert got["p99"] <= np.percentile(latest, 99) * (1 + acc)


def test_path_latency_matches_the_applications_stamps(tmp_path: Path) -> None:
    _against_stamps(tmp_path, "thread")


def test_a_path_is_written_read_and_checked() -> None:
    q = ss.parse_query("latency(src ~> sink): mean, p99")
    assert str(q) == "latency(src ~> sink): mean, p99"
    assert ss.parse_query(str(q)) == q
    with pytest.raises(QueryError, match="only latency"):
        ss.parse_query("occupancy(src ~> sink)")
    p = _pipeline(Sink(), 10)
    topology = p.topology()
    from streamscope.query import compile_queries

    plan = compile_queries(["latency(src ~> sink)", "latency(s* ~> twice)"], topology, 10**9)
    assert [t.name for q in plan.queries for t in q.targets] == ["src ~> sink", "src ~> twice"]
    # Tags leave through the origin's channel, arrive through the end's, ride on all between.
    assert {k for k in plan.taps if k[0] in ("depart", "arrive", "carry")} == {
        ("depart", "src -> work"), ("arrive", "twice -> sink"), ("arrive", "work -> twice"),
        ("carry", "src -> work"), ("carry", "work -> twice"), ("carry", "twice -> sink"),
    }  # fmt: skip
    with pytest.raises(QueryError, match="no way from 'sink' to 'src'"):
        compile_queries(["latency(sink ~> src)"], topology, 10**9)
    with pytest.raises(QueryError, match="unknown stage 'nowhere'"):
        compile_queries(["latency(src ~> nowhere)"], topology, 10**9)
    # A program's items cannot be followed: the mean from Little's law, by the names written.
    prog = compile_queries(
        ["latency(src ~> sink)"], topology, 10**9, open_world=True, follow=False
    ).queries[0]
    assert [(t.name, t.stats, t.littles) for t in prog.targets] == [
        ("src ~> sink", ("mean",), True)
    ]
    with pytest.raises(QueryError, match=r"only the mean .* latency\(src ~> sink\): mean"):
        compile_queries(
            ["latency(src ~> sink): mean, p99"], topology, 10**9, open_world=True, follow=False
        )
    with pytest.raises(QueryError, match="names its two stages, not a pattern"):
        compile_queries(["latency(s* ~> sink)"], topology, 10**9, open_world=True, follow=False)
    # A finished run's file is read in an open world too (retime): its paths are found again.
    again = compile_queries(["latency(src ~> sink)"], topology, 10**9, open_world=True)
    assert [t.name for t in again.queries[0].targets] == ["src ~> sink"]


def test_a_path_across_processes_is_followed_item_by_item(tmp_path: Path) -> None:
    """The same four stages, the work in a process of its own: the tags ride in the shared
    memory slots' headers, sampled at the origin and recorded at the end as between threads."""
    _against_stamps(tmp_path, ss.Process("worker"))


async def _waits(item: tuple[int, int]) -> tuple[int, int]:
    await asyncio.sleep(0.0004)
    return item


def test_a_path_through_an_event_loop_gives_its_mean_from_littles_law(tmp_path: Path) -> None:
    """An event loop's tasks share one thread, so no tag can ride with an item through them:
    the path's mean comes from Little's law over it, against the items' own stamps."""
    from streamscope.query import compile_queries

    def build(sink: Sink, n: int) -> ss.Pipeline:
        p = ss.Pipeline("loop")
        p.add("src", Source(n))
        p.add("work", _waits, resource=ss.Asyncio("loop"))
        p.add("twice", twice)
        p.add("sink", sink)
        p.chain("src", "work", "twice", "sink", capacity=64)
        return p

    topology = build(Sink(), 10).topology()
    with pytest.raises(QueryError, match="stage 'work' is a task of an event loop"):
        compile_queries(["latency(src ~> sink): p99"], topology, 10**9)
    plan = compile_queries(["latency(src ~> sink)"], topology, 10**9)
    (target,) = plan.queries[0].targets
    assert (target.stats, target.littles) == (("mean",), True)
    # No tags: the ends of every channel on the way and the inner stages' states.
    assert not {k for k in plan.taps if k[0] in ("depart", "arrive", "carry")}
    assert {("state", "work"), ("state", "twice"), ("head", "src -> work")} <= plan.taps

    sink = Sink()
    out = tmp_path / "loop.duckdb"
    res = ss.run(build(sink, 2000), ["latency(src ~> sink) every 30s"], ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    truth = np.array(sink.latencies, dtype=np.float64)
    with ss.load(out) as run:
        (frame,) = run.results(0, "src ~> sink")
        notes = run.notes()
    (mean,) = frame.points
    assert isinstance(mean, ScalarPoint) and mean.stat == "mean"
    print(f"Little's law {mean.value:.0f} ns, truth {truth.mean():.0f} ns over {truth.size}")
    # Each part's item-time over the items that left it, weighed by the flow: the run's mean.
    # (The generator holds its input until its second output is put: its first output's
    # time there is counted as long, a bias of half the gap between its puts.)
    assert mean.value == pytest.approx(truth.mean(), rel=0.05)
    assert any(about == "littles_law" and "src ~> sink" in text for about, text in notes)


class Arrivals:
    """The host's sink: the true time each item arrived, and its latency by that time; and
    when it was done with each (it asked for the next one after that)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []
        self.done: list[int] = []

    def process(self, item: tuple[int, int]) -> None:
        now = time.monotonic_ns()
        self.seen.append((now, now - item[1]))
        self.done.append(time.monotonic_ns())


def test_a_path_across_a_device_link_stays_inside_its_bounds(tmp_path: Path) -> None:
    """A source and a stage on an emulated device (its own clock, 80 ppm fast, which the
    monitor calibrates), a bulk-transfer link to the host's sink: each frame's median latency
    lies within the frame's reported uncertainty of what the items' own stamps allow (the
    source's on either side of its put, the sink's after its get and after it was done with
    the item before: ``_clocktruth.check``), whatever held a thread back between them."""
    dev = ss.EmulatedDevice("dev", bulk_size=8, transfer_us=300, latency_us=50, timeout_us=3000,
                            clock="rate_ppm=80,offset_s=4,tick_ns=5")  # fmt: skip
    sink = Arrivals()
    handed = tmp_path / "handed.npy"
    p = ss.Pipeline("across")
    p.add("src", Source(3000, 500_000, handed), resource=dev)
    p.add("work", Work(150_000), resource=dev)
    p.add("sink", sink)
    p.connect("src", "work", capacity=16)
    p.connect("work", "sink", capacity=16)
    out = tmp_path / "across.duckdb"
    q = "latency(src ~> sink): p50, count every 250ms"
    res = ss.run(p, [q], ss.RunOptions(out=out, calibrate_every_s=0.5))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        t0 = run.meta.t0_host_ns
        frames = run.results(0, "src ~> sink")
    seen = np.array(sink.seen, dtype=np.int64)
    got_latest = seen[:, 0]
    made = got_latest - seen[:, 1]
    item = np.argsort(made, kind="stable")  # (the source's items in order: by their stamps)
    handed_at = np.empty_like(made)
    handed_at[item] = np.load(handed)
    done_before = np.concatenate(([0], np.array(sink.done[:-1], dtype=np.int64)))
    got_earliest = np.maximum(made, done_before)
    checked, missed, worst, negative = benchmark("_clocktruth").check(
        made.astype(np.float64), got_earliest.astype(np.float64), t0, 250_000_000, 5.0, frames,
        got_latest.astype(np.float64), handed_at.astype(np.float64),
    )  # fmt: skip
    print(f"{checked} frames, {missed} outside by up to {worst / 1e3:.1f} us")
    assert missed == 0 and negative == 0, (checked, missed, worst, negative)
    assert checked >= 4
    assert sum(float(f.point("count").value or 0) for f in frames) == 3000  # type: ignore[union-attr]


def test_the_flagships_path_is_inside_its_bounds_of_the_applications_own_times(
    tmp_path: Path,
) -> None:
    """``examples/laplace.py --stamps``: ``prng`` (on the emulated device, its clock not the
    host's) notes the time before it hands each block on and after (resumed), ``avg`` sends on
    the number of the first block it took since its last update and notes the time before,
    ``print`` notes when each update came. Each update's latency is between two of the
    application's own stamps (taken a scheduling delay from the taps beside them, which a busy
    machine makes milliseconds: 1.6 ms once): the monitor's arrivals per frame, in the order
    ``print`` took them, each arrived inside its frame by those stamps, and each frame's mean,
    within its bounds, meets the mean of the application's bounds."""
    import subprocess
    import sys

    stamps = tmp_path / "stamps"
    stamps.mkdir()
    out = tmp_path / "laplace.duckdb"
    q = "latency(prng ~> print): mean, p50, count every 500ms"
    cli = Path(sys.executable).with_name("streamscope")
    app = Path(__file__).resolve().parents[2] / "examples" / "laplace.py"
    proc = subprocess.run(
        [str(cli), "run", str(app), "--out", str(out), "--quiet", "--query", q, "--",
         "--blocks", "2000", "--every", "20", "--stamps", str(stamps), "--quiet"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    put = {int(i): (int(before), int(after)) for i, after, before in np.load(stamps / "prng.npy")}
    sent = dict(np.load(stamps / "avg.npy").tolist())
    came = np.load(stamps / "print.npy")
    assert len(came) == 2000 // 20 == len(sent)
    # Each update's arrival between the application's own stamps: after avg's put and after
    # print was done with the update before it (the link brings them 16 at a time: print then
    # takes one right after another), before print's stamp of it; its latency so too.
    arrived = np.array([(max(sent[i], prev), t) for (i, t), prev
                        in zip(came.tolist(), [0, *came[:-1, 1].tolist()], strict=True)],
                       dtype=np.int64)  # fmt: skip
    left = np.array([put[i] for i in came[:, 0].tolist()], dtype=np.float64)  # (before, after)
    low, high = arrived[:, 0] - left[:, 1], arrived[:, 1] - left[:, 0]
    with ss.load(out) as run:
        t0 = run.meta.t0_host_ns
        frames = run.results(0, "prng ~> print")
    taken = 0
    for fr in frames:
        got = _points(fr.points)
        n = int(got["count"] or 0)
        if not n:
            continue
        mine = slice(taken, taken + n)  # print takes its updates in order
        taken += n
        lo, hi = arrived[mine, 0] - t0, arrived[mine, 1] - t0
        assert (lo < fr.t_end_ns).all() and (hi >= fr.t_start_ns).all(), fr.frame
        mean, unc = got["mean"], got["uncertainty_ns"]
        assert mean is not None and unc is not None
        truth = (float(low[mine].mean()), float(high[mine].mean()))
        print(f"frame {fr.frame}: {n} arrivals, mean {mean / 1e6:.4f} ms +- {unc / 1e3:.0f} us, "
              f"the application's {truth[0] / 1e6:.4f}..{truth[1] / 1e6:.4f} ms")  # fmt: skip
        assert mean - unc <= truth[1] and mean + unc >= truth[0], fr.frame
    assert taken == len(came)
