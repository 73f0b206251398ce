"""Monitor reduction rate: events per second through ``Engine.handle`` + ``Engine.advance``.

In: pre-built agent batches (~64k records each, see ``_synth``) for a four-stage chain, and real
compiled queries (occupancy with histogram, throughput, latency with quantiles, interinsertion,
state duty; 100 ms frames). Out: a table of events/s for the engine and for a plain numpy pass
over the same records (a sort and a bincount), and the engine's cost in numpy passes.

    python benchmarks/bench_reduction.py [--quick] [--reps N]
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np

import _synth
from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.transport.wire import Message

TARGET_EVENTS_PER_S = 5e6


def _clocks() -> tuple[int, int, int]:
    return time.perf_counter_ns(), time.process_time_ns(), time.thread_time_ns()


def _rates(
    events: int, t0: tuple[int, int, int], t1: tuple[int, int, int]
) -> tuple[float, float, float]:
    """Events per wall second, events per CPU second of the whole process (every thread), and
    the share of that CPU time spent outside this thread (helper threads working for it)."""
    wall, cpu, mine = (b - a for a, b in zip(t0, t1, strict=True))
    return events * 1e9 / wall, events * 1e9 / cpu, max(cpu - mine, 0) / cpu


def run_engine(sc: _synth.Scenario, msgs: Sequence[Message], events: int) -> tuple[float, ...]:
    frames = 0

    def sink(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        nonlocal frames
        frames += len(results)

    engine = _synth.engine(sc, sink)
    end_ns = _synth.end_ns(msgs[-1])
    t0 = _clocks()
    for m in msgs:
        engine.handle(m)
        engine.advance()
    engine.finish(end_ns)
    t1 = _clocks()
    expected = len(engine.reducers) * -(-end_ns // _synth.FRAME_NS)
    if engine.events_seen != events or engine.late or frames != expected:
        raise RuntimeError(
            f"engine saw {engine.events_seen}/{events} events, {engine.late} late, "
            f"emitted {frames}/{expected} frames: the synthetic input is not lawful"
        )
    return _rates(events, t0, t1)


def run_numpy(n_probes: int, msgs: Sequence[Message], events: int) -> tuple[float, ...]:
    """The floor: one time sort and one per-(frame, probe) count of every batch."""
    t0 = _clocks()
    for m in msgs:
        ticks = m.records["ticks"]
        np.sort(ticks)
        frame = (ticks - _synth.T0_TICKS) // _synth.FRAME_NS
        np.bincount((frame - frame[0]) * (n_probes + 1) + m.records["probe"])
    t1 = _clocks()
    return _rates(events, t0, t1)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (3 if args.quick else 7)
    n_events = 1_000_000 if args.quick else 4_000_000
    sc = _synth.scenario()
    msgs = list(_synth.messages(sc, n_events))
    events = sum(len(m.records) for m in msgs)
    print(machine())
    print(
        f"{events:,} events in {len(msgs)} batches of ~{events // len(msgs):,} records; "
        f"{len(sc.topology.probes)} probes, {len(sc.plan.queries)} queries, "
        f"{sum(len(q.targets) for q in sc.plan.queries)} (query, target) reducers, "
        f"{_synth.FRAME_NS // 1_000_000} ms frames over {_synth.end_ns(msgs[-1]) / 1e9:.1f} s; "
        f"{reps} interleaved repetitions"
    )
    wall, cpu, helpers = interleave(
        [
            ("Engine handle + advance", lambda: run_engine(sc, msgs, events)),
            ("numpy sort + bincount", lambda: run_numpy(sc.n_probes, msgs, events)),
        ],
        reps,
        metrics=3,
    )
    rows = []
    slowdowns: list[Summary] = []
    for clock, (eng, ref) in (("wall", wall), ("CPU", cpu)):
        # Rates are inverse times: numpy rate / engine rate = engine time / numpy time.
        slow = paired_ratios(ref, eng)
        slowdowns.append(slow)
        rows += [
            [
                s.name,
                clock,
                f"{s.median / 1e6:.2f}",
                fmt_spread(s),
                f"{max(s.samples) / 1e6:.2f}",
                f"{slow.median:.1f}x" if s is eng else "1.0x",
                f"{slow.best:.1f}..{max(slow.samples):.1f}" if s is eng else "",
            ]
            for s in (eng, ref)
        ]
    print()
    print(table(["variant", "clock", "M ev/s", "spread", "best", "time vs numpy", "range"], rows))
    eng_wall, eng_cpu = wall[0], cpu[0]
    verdict = "meets" if eng_cpu.median >= TARGET_EVENTS_PER_S else "misses"
    print(
        f"\ntarget: >= {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s on one core: "
        f"{eng_wall.median / 1e6:.2f} M/s wall, {eng_cpu.median / 1e6:.2f} M/s CPU "
        f"({verdict} it by CPU time on this machine); "
        f"the engine costs {slowdowns[1].median:.1f} numpy passes"
    )
    helper = helpers[0].median
    if helper > 0.05:
        print(
            f"note: {100 * helper:.0f}% of the engine's CPU time was spent by other threads of "
            "this process: numpy's BLAS workers behind np.dot (OPENBLAS_NUM_THREADS="
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
