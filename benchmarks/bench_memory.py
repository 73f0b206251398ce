"""Monitor memory is flat: the engine's peak memory must not grow with the number of events.

In: synthetic agent batches (see ``_synth``), made one at a time and fed to a fresh ``Engine``
(the same queries as ``bench_reduction``), 1e6 then 1e7 events (``--quick``: 1e5 then 1e6).
Out: for each size, the peak RSS growth (untraced runs) and the peak of ``tracemalloc`` (which
sees numpy's buffers; a separate traced run, since tracing costs memory and time of its own),
each run in a fresh child process, and the ratio large / small (flat = 1.0x).

    python benchmarks/bench_memory.py [--quick] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence

import psutil

import _synth
from _harness import machine, parser, table
from streamscope.aggregate.points import DropCount, FrameResult

MiB = 1 << 20
Key = tuple[int, str, bool]  # events, mode (engine | synth), traced


def child(n_events: int, mode: str, traced: bool) -> dict[str, float]:
    """One measurement in this (fresh) process: ``engine`` feeds the engine; ``synth`` only makes
    the batches, to show how much of the peak is the generator's own."""
    sc = _synth.scenario()
    frames = 0

    def sink(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        nonlocal frames
        frames += len(results)

    engine = _synth.engine(sc, sink)
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    if traced:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    events = 0
    last = None
    rss_trail: list[int] = []  # RSS growth after each batch: a leak would show as a trend
    for m in _synth.messages(sc, n_events):
        events += len(m.records)
        last = m
        if mode == "engine":
            engine.handle(m)
            engine.advance()
        rss_trail.append(proc.memory_info().rss - rss0)
    assert last is not None
    if mode == "engine":
        engine.finish(_synth.end_ns(last))
        if engine.events_seen != events or engine.late:
            raise RuntimeError(f"engine saw {engine.events_seen}/{events}, {engine.late} late")
    secs = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    half = len(rss_trail) // 2
    return {
        "events": events,
        "frames": frames,
        "traced_peak": peak - base,
        "rss_growth": peak_rss - rss0,
        "rss_end_growth": proc.memory_info().rss - rss0,
        "secs": secs,
        "rss_first_half": statistics.median(rss_trail[: max(half, 1)]),
        "rss_second_half": statistics.median(rss_trail[half:]),
    }


def measure(key: Key) -> dict[str, float]:
    n_events, mode, traced = key
    cmd = [sys.executable, __file__, "--child", str(n_events), "--mode", mode]
    out = subprocess.run(
        [*cmd, "--traced"] if traced else cmd, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"child for {n_events:,} events ({mode}) failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="engine", choices=("engine", "synth"), help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.mode, args.traced)))
        return 0
    small, large = (100_000, 1_000_000) if args.quick else (1_000_000, 10_000_000)
    reps = args.reps or (1 if args.quick else 2)
    print(machine())
    print(f"each run in a fresh process; {reps} interleaved untraced repetitions per size")
    runs: dict[Key, list[dict[str, float]]] = {}
    sizes: list[Key] = [(small, "engine", False), (large, "engine", False)]
    for rnd in range(reps):
        for key in sizes if rnd % 2 == 0 else reversed(sizes):
            runs.setdefault(key, []).append(measure(key))
    synth: Key = (large, "synth", False)
    runs[synth] = [measure(synth)]
    # tracemalloc's figure is deterministic: one traced run per row is enough.
    rows_keys = [(k, (k[0], k[1], True)) for k in [*sizes, synth]]
    for _, traced in rows_keys:
        runs[traced] = [measure(traced)]

    def med(key: Key, field: str) -> float:
        return statistics.median(r[field] for r in runs[key])

    def spread(key: Key, field: str) -> str:
        vals = [r[field] / MiB for r in runs[key]]
        return f"{min(vals):.1f}..{max(vals):.1f}"

    rows = [
        [
            f"{'Engine' if u[1] == 'engine' else 'generator only'}, {med(u, 'events'):,.0f} ev",
            f"{med(t, 'traced_peak') / MiB:.1f}",
            f"{med(u, 'rss_growth') / MiB:.1f}",
            spread(u, "rss_growth"),
            f"{med(u, 'rss_end_growth') / MiB:.1f}",
            f"{med(u, 'rss_first_half') / MiB:.1f} / {med(u, 'rss_second_half') / MiB:.1f}",
            f"{med(u, 'events') / med(u, 'secs') / 1e6:.2f}",
        ]
        for u, t in rows_keys
    ]
    print()
    headers = [
        "run",
        "traced peak MiB",
        "peak RSS +MiB",
        "range",
        "RSS after +MiB",
        "RSS 1st/2nd half",
        "M ev/s",
    ]
    print(table(headers, rows))
    (s_u, s_t), (b_u, b_t) = rows_keys[0], rows_keys[1]
    traced_ratio = med(b_t, "traced_peak") / med(s_t, "traced_peak")
    rss_ratio = med(b_u, "rss_growth") / max(med(s_u, "rss_growth"), 1.0)
    print(
        f"\npeak memory, {large:,.0f} vs {small:,.0f} events: traced {traced_ratio:.2f}x, "
        f"RSS growth {rss_ratio:.2f}x (target ~1.0x: flat)"
    )
    print(
        "RSS 1st/2nd half: median RSS growth after each batch over the first and the second half "
        "of the run (equal when nothing accumulates). M ev/s includes making the batches."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
