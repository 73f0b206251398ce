"""The stack sampler (native and twin alike), its reduction per frame and stage, and the hot
functions drawn from it: known stacks in known states, read back from the records and tables."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from streamscope.analysis.hotspots import summarize, where_time_goes
from streamscope.core.native import implementations
from streamscope.core.records import Kind, SampledState, State
from streamscope.core.rings import anonymous_ring
from streamscope.core.tablerows import TableRows
from streamscope.reduction import stacks as reduction
from streamscope.reduction.stacks import OTHER, OWN, UNREAD, StackCounts
from streamscope.transport.ringreader import RingReader

IMPLS = implementations()


def spin_here(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _table(path: Path) -> dict[int, list[str]]:
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            f = line.split("\t")
            out[int(f[0])] = f[2::3]
    return out


def _decode(mem: Any) -> list[tuple[int, int, int, int]]:
    """(worker probe, period shift, state, stack id) of each record in the ring."""
    rec = RingReader(mem).drain().records
    assert set(rec["kind"].tolist()) <= {int(Kind.STACK)}
    return [(v >> 32, (v >> 28) & 0xF, (v >> 24) & 0xF, v & 0xFFFFFF)
            for v in rec["value"].astype(np.int64).tolist()]  # fmt: skip


def _decode_timed(mem: Any) -> list[tuple[int, int, int, int, int]]:
    """``_decode``'s fields of each record, and when it was taken (the host's clock, ns)."""
    rec = RingReader(mem).drain().records
    return [(v >> 32, (v >> 28) & 0xF, (v >> 24) & 0xF, v & 0xFFFFFF, t)
            for v, t in zip(rec["value"].astype(np.int64).tolist(), rec["ticks"].tolist(),
                            strict=True)]  # fmt: skip


@pytest.mark.parametrize("impl", IMPLS.values(), ids=list(IMPLS))
def test_a_threads_stack_is_sampled_in_the_state_its_tracker_is_in(
    impl: ModuleType, tmp_path: Path
) -> None:
    """A worker busy 0.3 s, then blocked 0.15 s, stamping each change on the host's clock:
    the samples taken while it was busy by its stamps are of its stack, running or waiting
    for a core or the interpreter's lock, those while it was blocked say so without a stack
    (but one at each change, whose clock and state a pass may read on either side of it).
    How many samples a window holds is the machine's: the twin's sampler takes the
    interpreter's lock from a spinning thread once a switch interval at best, and doubles its
    period when a pass costs more than its budget; beside a busy core it took 28 in the busy
    window where the test had wanted 30."""
    mem = anonymous_ring(9, int(Kind.STACK), 1 << 14)
    sampler = impl.StackSampler(impl.Ring(mem, impl.Clock()), str(tmp_path / "t.tsv"), 2_000_000)
    tracker = impl.StateTracker("s")
    removed = threading.Event()
    stamps: dict[str, int] = {}

    def worker() -> None:
        assert sampler.add(tracker, 42)
        tracker.set(int(State.BUSY))
        stamps["busy"] = time.monotonic_ns()
        spin_here(0.3)
        stamps["busy_end"] = time.monotonic_ns()
        tracker.set(int(State.BLOCKED_IN))
        stamps["blocked"] = time.monotonic_ns()
        time.sleep(0.15)
        stamps["blocked_end"] = time.monotonic_ns()
        sampler.remove(tracker)
        stamps["removed"] = time.monotonic_ns()
        removed.set()
        time.sleep(0.05)

    sampler.start()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    sampler.stop()
    timed = _decode_timed(mem)
    samples = [x[:4] for x in timed]
    table = _table(tmp_path / "t.tsv")
    assert {w for w, *_ in samples} == {42}
    busy = [(st, sid) for _, _, st, sid, at in timed if stamps["busy"] <= at <= stamps["busy_end"]]
    waited = [(st, sid) for _, _, st, sid, at in timed
              if stamps["blocked"] <= at <= stamps["blocked_end"]]  # fmt: skip
    # busy: on a core, or waiting for one or for the interpreter's lock (which the twin's
    # sampler takes to read it)
    running = [sid for st, sid in busy if st == SampledState.RUNNING]
    awake = [sid for st, sid in busy if st in (SampledState.RUNNING, SampledState.WAITING)]
    blocked = [sid for st, sid in waited if st == SampledState.BLOCKED_IN]
    assert running and len(awake) >= len(busy) - 1, (stamps, timed)
    assert blocked and len(blocked) >= len(waited) - 1, (stamps, timed)
    assert set(blocked) == {0}  # a blocked worker's stack is not read
    leaves = [table[sid][-1] for sid in running if sid]
    assert leaves.count("spin_here") >= 0.9 * len(running), leaves
    assert (
        table[running[0]][-2]
        == "test_a_threads_stack_is_sampled_in_the_state_its_tracker_is_in.<locals>.worker"
    )
    assert sampler.samples == len(samples) and sampler.cpu_ns > 0
    assert (tmp_path / "t.tsv").read_text().splitlines()[-1].startswith("#cost\t")


@pytest.mark.parametrize("impl", IMPLS.values(), ids=list(IMPLS))
def test_a_task_is_sampled_while_it_runs_and_waiting_while_it_awaits(
    impl: ModuleType, tmp_path: Path
) -> None:
    mem = anonymous_ring(9, int(Kind.STACK), 1 << 14)
    sampler = impl.StackSampler(impl.Ring(mem, impl.Clock()), str(tmp_path / "t.tsv"), 2_000_000)
    tracker = impl.StateTracker("s", None, False)

    async def watched() -> None:
        task = asyncio.current_task()
        assert task is not None
        sampler.add(tracker, 7, task.get_coro())
        tracker.set(int(State.BUSY))
        spin_here(0.25)
        await asyncio.sleep(0.25)  # busy on its item, but not running: another task is
        tracker.set(int(State.IDLE))

    async def other() -> None:
        await asyncio.sleep(0.27)
        spin_here(0.2)

    async def main() -> None:
        await asyncio.gather(watched(), other())

    sampler.start()
    t = threading.Thread(target=asyncio.run, args=(main(),))
    t.start()
    t.join()
    sampler.stop()
    samples = _decode(mem)
    table = _table(tmp_path / "t.tsv")
    running = [sid for _, _, st, sid in samples if st == SampledState.RUNNING]
    waiting = [sid for _, _, st, sid in samples if st == SampledState.WAITING]
    # (the twin's sampler needs the interpreter's lock, which the spinning task gives up only
    # every switch interval: fewer samples of it running, the fewer the busier the machine)
    assert len(running) >= 15 and len(waiting) >= 30, samples
    # awaiting: no stack of its own, and never the other task's (a sample may find it on its
    # loop but not run since the last one: waiting, with its own frames)
    assert waiting.count(0) >= 15
    assert all(table[sid][0].endswith("watched") for sid in waiting if sid), waiting
    stacks = [table[sid] for sid in running]
    # from the task's coroutine up: none of the event loop's frames below it
    assert all(frames[0].endswith("watched") for frames in stacks), stacks
    # (a sample may catch it setting up its sleep, its own code too)
    assert sum(frames[-1] == "spin_here" for frames in stacks) >= 0.9 * len(stacks), stacks


def _counts(tmp_path: Path, lines: list[str]) -> tuple[StackCounts, list[TableRows]]:
    path = tmp_path / "stacks-5.tsv"
    path.write_text("#period\t1000000\n#process\tmain\n#priority\trealtime\n"
                    + "".join(x + "\n" for x in lines))  # fmt: skip
    rows: list[TableRows] = []
    counts = StackCounts(100, rows.append)
    counts.add_probe(5, str(path))
    return counts, rows


def _v(worker: int, state: SampledState, sid: int, shift: int = 0) -> int:
    return worker << 32 | shift << 28 | int(state) << 24 | sid


def test_samples_are_counted_per_frame_stage_state_and_stack(tmp_path: Path) -> None:
    own = reduction._OWN + "pipeline/program/dropin.py"
    counts, rows = _counts(tmp_path, [
        "1\t2\tmain\tapp.py\t1\tscale\tapp.py\t12",
        f"2\t3\tmain\tapp.py\t1\tblur\tapp.py\t30\tQueue.get\t{own}\t40",
        "#cost\t5000\t7\t90000",
    ])  # fmt: skip
    t = np.array([10, 20, 30, 120, 130, 140], dtype=np.int64)
    v = np.array([_v(1, SampledState.RUNNING, 1), _v(1, SampledState.RUNNING, 1),
                  _v(1, SampledState.RUNNING, 2, shift=1), _v(1, SampledState.WAITING, 2),
                  _v(2, SampledState.BLOCKED_IN, 0), _v(3, SampledState.IDLE, 0)],
                 dtype=np.int64)  # fmt: skip
    counts.take(5, t, v, {1: "resize", 2: "write"}.get)
    counts.flush(150)  # only the first frame has ended
    assert len(rows) == 1
    got = rows[0].columns
    assert got["t_ns"] == [0, 0] and got["stage"] == ["resize", "resize"]
    assert got["stack"] == [
        "main (app.py:1);blur (app.py:30);(streamscope)",
        "main (app.py:1);scale (app.py:12)",
    ]
    assert got["samples"] == [1, 2] and got["ns"] == [2_000_000, 2_000_000]  # its period then
    counts.finish()
    got = rows[1].columns
    assert got["stage"] == ["resize", "write"] and got["state"] == ["waiting", "blocked_in"]
    assert got["stack"] == ["main (app.py:1);blur (app.py:30);(streamscope)", ""]  # 3: no stage
    named = {r.table: r.columns for r in rows[2:]}
    assert named["stack_id"]["stack"] == [
        "main (app.py:1);scale (app.py:12)",
        "main (app.py:1);blur (app.py:30);(streamscope)",
    ]
    assert named["stack_sampler"]["cpu_ns"] == [5000]
    assert named["stack_sampler"]["priority"] == ["realtime"]


def test_a_stage_keeps_its_stacks_apart_up_to_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reduction, "MAX_STACKS", 2)
    counts, rows = _counts(tmp_path, [f"{i}\t1\tf{i}\tapp.py\t{i}" for i in range(1, 5)])
    v = np.array([_v(1, SampledState.RUNNING, i) for i in (1, 2, 3, 4, 1)], dtype=np.int64)
    counts.take(5, np.arange(5, dtype=np.int64), v, lambda w: "s")
    counts.finish()
    stacks = dict(zip(rows[0].columns["stack"], rows[0].columns["samples"], strict=True))
    assert stacks == {"f1 (app.py:1)": 2, "f2 (app.py:2)": 1, OTHER: 2}


def test_a_frame_the_sampler_could_not_read_is_named_so(tmp_path: Path) -> None:
    """A code object that ended as it was read is ``?`` in the process's table: it reads as
    ``[unreadable frame]``, not as a function called ``?`` in a file called ``?``."""
    counts, rows = _counts(tmp_path, ["1\t2\tmain\tapp.py\t1\t?\t?\t-1"])
    counts.take(1, np.zeros(1, dtype=np.int64), np.array([_v(1, SampledState.RUNNING, 1)]),
                lambda w: "s")  # fmt: skip
    counts.finish()
    assert rows[0].columns["stack"] == [f"main (app.py:1);{UNREAD}"]


def test_hot_functions_are_shares_of_the_busy_time_and_waiting_is_not_one() -> None:
    rows = [
        ("resize", "running", "main (a.py:1);scale (a.py:12)", 50, 500),
        ("resize", "running", "main (a.py:1);scale (a.py:12);helper (b.py:3)", 10, 100),
        ("resize", "running", "main (a.py:1);blur (a.py:30)", 20, 200),
        ("resize", "waiting", "main (a.py:1);fetch (a.py:40)", 20, 200),
        ("resize", "blocked_in", "", 100, 1000),
        ("read", "blocked_out", "", 10, 100),
    ]
    (s,) = summarize(rows).values()
    assert s.busy_ns == 1000 and s.running == pytest.approx(0.8)
    assert s.waiting == pytest.approx(0.2)
    shares = {h.function: (h.self_share, h.total_share) for h in s.functions}
    assert shares["scale (a.py:12)"] == pytest.approx((0.5, 0.6))
    assert shares["helper (b.py:3)"] == pytest.approx((0.1, 0.1))
    assert shares["main (a.py:1)"] == pytest.approx((0.0, 0.8))
    assert "fetch (a.py:40)" not in shares
    assert s.waiting_in[0].function == "fetch (a.py:40)"
    assert where_time_goes(s) == (
        "resize: 50 % in scale() (a.py:12), 20 % in blur() (a.py:30), 10 % in helper() "
        "(b.py:3), 20 % waiting in fetch() (a.py:40)"
    )
    # the frame that stands for the monitor's own code is named as it is, not as a call
    own = [("taker", "running", f"main (a.py:1);{OWN}", 60, 600),
           ("taker", "running", "main (a.py:1);put (q.py:9)", 40, 400)]  # fmt: skip
    (t,) = summarize(own).values()
    assert where_time_goes(t) == "taker: 60 % in (streamscope), 40 % in put() (q.py:9)"


def test_a_speed_change_may_name_one_function() -> None:
    from streamscope.analysis.whatif.kinds import Change, WhatIfError

    ch = Change.parse("resize.speed[Image.scale]=2x")
    assert (ch.target, ch.attr, ch.value, ch.function) == ("resize", "speed", 2.0, "Image.scale")
    assert Change.parse("resize.speed=2x").function == ""
    for bad in ("resize.replicas[scale]=2", "resize.speed[]=2x", "a -> b.capacity[f]=4"):
        with pytest.raises(WhatIfError, match=r"function|capacity"):
            Change.parse(bad)


def test_a_function_speeds_its_stage_up_by_its_share_only() -> None:
    from streamscope.analysis.whatif.functions import function_shares, names_function

    rows = [
        ("resize", "running", "main (a.py:1);Image.scale (a.py:12)", 6, 600),
        ("resize", "running", "main (a.py:1);Image.scale (a.py:12);helper (b.py:3)", 1, 100),
        ("resize", "waiting", "main (a.py:1);fetch (a.py:40)", 1, 100),
        ("resize", "running", "main (a.py:1);blur (a.py:30)", 2, 200),
        ("resize", "blocked_in", "", 50, 5000),
        ("read", "running", "main (a.py:1);Image.scale (a.py:12)", 9, 900),
    ]
    assert names_function("Image.scale (a.py:12)", "scale")
    assert names_function("Image.scale (a.py:12)", "Image.*")
    assert not names_function("Image.rescale (a.py:9)", "scale")
    share, busy, hottest = function_shares(rows, "resize", "scale")
    assert share == pytest.approx(0.7) and busy == 1000  # what it called included
    assert hottest[0] == "Image.scale"
    assert function_shares(rows, "resize", "nothing")[0] == 0.0


@pytest.mark.parametrize("impl", IMPLS.values(), ids=list(IMPLS))
def test_a_thousand_workers_are_all_sampled_with_a_few_descriptors(
    impl: ModuleType, tmp_path: Path
) -> None:
    """A program of a thousand threads: every worker is sampled (a process's sampler once
    took 512 at most, and the figure of what monitoring cost missed the others), and the
    sampler holds 64 descriptors at most for them, whatever the process's limit."""
    import os

    n = 1000
    mem = anonymous_ring(9, int(Kind.STACK), 1 << 16)
    sampler = impl.StackSampler(impl.Ring(mem, impl.Clock()), str(tmp_path / "t.tsv"), 5_000_000)
    trackers = [impl.StateTracker(f"w{i}") for i in range(n)]
    added, go = threading.Barrier(n + 1), threading.Event()

    taken: list[bool] = [False] * n

    def worker(i: int) -> None:
        taken[i] = sampler.add(trackers[i], 1000 + i)
        trackers[i].set(int(State.BLOCKED_IN))
        added.wait()
        go.wait()
        sampler.remove(trackers[i])

    fds_before = len(os.listdir("/proc/self/fd"))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    added.wait()
    held = len(os.listdir("/proc/self/fd")) - fds_before
    assert all(taken), f"{taken.count(False)} workers refused"
    sampler.start()
    seen: set[int] = set()
    deadline = time.monotonic() + 60  # a cap against a hang: ends once every worker is seen
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.02)
        seen |= {w for w, *_ in _decode(mem)}
    # stopped before the thousand let go: a sampler at a 5 ms period (the twin's holding the
    # interpreter's lock through each pass over a thousand stacks) and a thousand threads
    # waking at once to take its lock in ``remove`` starved each other for minutes beside a
    # busy core; what is checked was sampled already
    sampler.stop()
    go.set()
    for t in threads:
        t.join()
    assert held <= 64
    assert seen == {1000 + i for i in range(n)}
    assert len(os.listdir("/proc/self/fd")) <= fds_before  # every descriptor closed again


@pytest.mark.parametrize("impl", IMPLS.values(), ids=list(IMPLS))
def test_among_many_workers_at_rest_each_pass_samples_the_busy_and_a_share_of_the_rest(
    impl: ModuleType, tmp_path: Path
) -> None:
    """300 workers at rest and one busy: every pass samples the busy one; each worker at rest
    is sampled one pass in 8 (300 >> 3 <= 64), its sample standing for 8 periods, so a pass
    costs what some 40 samples do, not 300, and the time the samples stand for is unchanged."""
    n = 300
    mem = anonymous_ring(9, int(Kind.STACK), 1 << 16)
    sampler = impl.StackSampler(impl.Ring(mem, impl.Clock()), str(tmp_path / "t.tsv"), 2_000_000)
    trackers = [impl.StateTracker(f"w{i}") for i in range(n + 1)]
    added, done = threading.Barrier(n + 2), threading.Event()

    def resting(i: int) -> None:
        assert sampler.add(trackers[i], 1000 + i)
        trackers[i].set(int(State.BLOCKED_IN))
        added.wait()
        done.wait()
        sampler.remove(trackers[i])

    def busy() -> None:
        assert sampler.add(trackers[n], 7)
        trackers[n].set(int(State.BUSY))
        added.wait()
        while not done.is_set():
            spin_here(0.001)
        sampler.remove(trackers[n])

    threads = [threading.Thread(target=resting, args=(i,)) for i in range(n)]
    threads.append(threading.Thread(target=busy))
    for t in threads:
        t.start()
    added.wait()
    sampler.start()
    samples: list[tuple[int, int, int, int]] = []
    while sum(w == 7 for w, *_ in samples) < 100:  # the suite's timeout caps a hang
        time.sleep(0.02)
        samples += _decode(mem)
    sampler.stop()
    samples += _decode(mem)
    done.set()
    for t in threads:
        t.join()
    mine = [(sh, st) for w, sh, st, _ in samples if w == 7]
    rest = [(w, sh, st) for w, sh, st, _ in samples if w != 7]
    assert all(st in (SampledState.RUNNING, SampledState.WAITING) for _, st in mine)
    assert {st for _, _, st in rest} == {SampledState.BLOCKED_IN}
    # one pass in 8 each: a pass samples 300 / 8 of them (37 or 38), 8 periods each
    passes = len(mine)
    assert 37 * passes - 38 <= len(rest) <= 38 * passes + 38
    assert min(sh for _, sh, _ in rest) >= 3
    stood = sum(1 << sh for _, sh, _ in rest)
    assert stood == pytest.approx(n * sum(1 << sh for sh, _ in mine), rel=0.05)
    assert {w for w, _, _ in rest} == {1000 + i for i in range(n)}


@pytest.mark.parametrize("impl", IMPLS.values(), ids=list(IMPLS))
def test_the_samples_come_as_a_poisson_stream(impl: ModuleType, tmp_path: Path) -> None:
    """The gaps between passes are memoryless (exponential, mean one period): what a program
    does just after a sample (a worker waiting for a core gets it as the sampler's pass ends)
    does not change how soon the next one comes, so each state gets its share of samples
    (PASTA). Gaps of half to one and a half periods left the half period after such a change
    bare, and a stage asleep after its work showed up to 6 points less asleep than its own
    clock beside a busy core."""
    period = 1_000_000
    mem = anonymous_ring(9, int(Kind.STACK), 1 << 14)
    sampler = impl.StackSampler(impl.Ring(mem, impl.Clock()), str(tmp_path / "t.tsv"), period)
    tracker = impl.StateTracker("s")
    assert sampler.add(tracker, 5)
    tracker.set(int(State.BLOCKED_IN))  # at rest: a sample costs no stack read
    sampler.start()
    ticks: list[int] = []
    shifts: list[int] = []
    while len(ticks) < 1500:  # the suite's timeout caps a hang
        time.sleep(0.05)
        rec = RingReader(mem).drain().records
        ticks += rec["ticks"].astype(np.int64).tolist()
        shifts += ((rec["value"].astype(np.int64) >> 28) & 0xF).tolist()
    sampler.stop()
    sampler.remove(tracker)
    # Each gap in the periods it was drawn in: where a pass costs more than the sampler's budget
    # (the Python one beside a busy core) the period doubles, and each record carries the
    # period in force when the gap that led to it was drawn.
    gaps = np.diff(np.array(ticks)) / (period * 2.0 ** np.array(shifts[1:]))
    # exponential: 39 % of gaps under half a period (none when drawn from 0.5 to 1.5), and
    # past half a period, another period on average to go (half of one when uniform)
    assert 0.30 <= float(np.mean(gaps < 0.5)) <= 0.48, np.percentile(gaps, [5, 25, 50, 75, 95])
    past = gaps[gaps >= 0.5] - 0.5
    assert 0.8 <= float(past.mean()) <= 1.3, np.percentile(gaps, [5, 25, 50, 75, 95])
