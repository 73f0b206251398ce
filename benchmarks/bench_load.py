"""The monitor under sustained load: 50 stages in 5 processes, 100 queries, full speed for 60 s
(targets: the monitor's memory flat and at most 300 MB; every record reduced or counted as
refused; the frames' lag shown).

In: nothing (5 processes, each a chain of 10 stages that pass integers on as fast as they can,
for a fixed time). Out: the monitor process's memory (RSS and its private share, USS) sampled
every half second, first third against last third of the run; its CPU; the monitor's lag per
frame, as the run file records it; and, per probe, records kept plus records refused against
the items that the application itself counted on that channel.

    python benchmarks/bench_load.py [--quick] [--seconds S]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

import streamscope as ss
from _harness import machine, parser, table

PROCESSES = 5
CHAIN = 10  # stages per process
TARGET_MB = 300


def build(seconds: float, counts_dir: Path) -> ss.Pipeline:
    p = ss.Pipeline("load")
    for c in range(PROCESSES):
        proc = ss.Process(f"p{c}")
        names = [f"c{c}s{i}" for i in range(CHAIN)]

        def source(c: int = c) -> Iterator[int]:
            end = time.monotonic() + seconds
            k = 0
            while time.monotonic() < end:
                for _ in range(256):
                    yield k
                    k += 1

        got = [0]

        class Sink:
            def process(self, item: int, got: list[int] = got) -> None:
                got[0] += 1

            def teardown(self, c: int = c, got: list[int] = got) -> None:
                (counts_dir / f"{c}.json").write_text(json.dumps(got[0]))

        p.add(names[0], source, resource=proc)
        for name in names[1:-1]:
            p.add(name, lambda x: x, resource=proc)
        p.add(names[-1], Sink(), resource=proc)
        p.chain(*names, capacity=64)
    return p


def queries() -> list[str]:
    out = []
    for c in range(PROCESSES):
        for i in range(CHAIN - 1):
            out.append(f"occupancy(c{c}s{i} -> c{c}s{i + 1}): mean, max, histogram")
            out.append(f"latency(c{c}s{i} -> c{c}s{i + 1}): mean, p99")
    for c in range(PROCESSES):
        out.append(f"state(c{c}s*): duty")
    out += [f"throughput(c{c}s{CHAIN - 2} -> c{c}s{CHAIN - 1}): mean" for c in range(5)]
    return out[:100]


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=None)
    args = ap.parse_args()
    seconds = args.seconds or (5.0 if args.quick else 60.0)
    qs = queries()
    print(machine())
    print(f"{PROCESSES} processes x {CHAIN} stages, {len(qs)} queries, {seconds:g} s at full speed")
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        tmpd = Path(tmp)
        out = tmpd / "load.duckdb"
        results: list[ss.RunResult] = []
        run = threading.Thread(
            target=lambda: results.append(
                ss.run(build(seconds, tmpd), qs, ss.RunOptions(out=out, frame_ns=1_000_000_000))
            )
        )
        t0 = time.monotonic()
        run.start()
        samples: list[tuple[float, float, float, float]] = []  # (s, rss MB, uss MB, cpu s)
        monitor: psutil.Process | None = None
        while run.is_alive():
            if monitor is None:
                for child in psutil.Process().children(recursive=True):
                    try:
                        if "streamscope.monitor" in " ".join(child.cmdline()):
                            monitor = child
                    except psutil.Error:
                        continue
            if monitor is not None:
                try:
                    mem = monitor.memory_full_info()
                    cpu = monitor.cpu_times()
                    samples.append(
                        (
                            time.monotonic() - t0,
                            mem.rss / 2**20,
                            mem.uss / 2**20,
                            cpu.user + cpu.system,
                        )
                    )
                except psutil.Error:
                    pass
            time.sleep(0.5)
        run.join()
        res = results[0]
        if res.status != "completed":
            raise RuntimeError(f"the run {res.status}: {res.error}")
        counts = {int(p.stem): json.loads(p.read_text()) for p in tmpd.glob("*.json")}
        with ss.load(out) as r:
            kinds = {p.id: p for p in r.topology.probes}
            per_probe: dict[int, list[int]] = {}
            for d in r.drops():
                acc = per_probe.setdefault(d.probe_id, [0, 0])
                acc[0] += d.recorded
                acc[1] += d.dropped
            lag = [row[0] for row in r.sql("SELECT lag_ns FROM monitor ORDER BY frame")[1]]
            frames = r.sql("SELECT count(*) FROM frame")[1][0][0]
    steady = [s for s in samples if s[0] >= min(5.0, seconds / 3)]
    third = max(1, len(steady) // 3)
    first, last = steady[:third], steady[-third:]
    rows = [
        ["RSS MB", f"{statistics.median(s[1] for s in first):.0f}",
         f"{statistics.median(s[1] for s in last):.0f}", f"{max(s[1] for s in samples):.0f}"],
        ["USS MB (private)", f"{statistics.median(s[2] for s in first):.0f}",
         f"{statistics.median(s[2] for s in last):.0f}", f"{max(s[2] for s in samples):.0f}"],
    ]  # fmt: skip
    print(table(["monitor memory", "first third", "last third", "max"], rows))
    cpu = samples[-1][3] if samples else 0.0
    print(f"monitor CPU: {cpu:.1f} s over {samples[-1][0] if samples else 0:.1f} s")
    bad = []
    channel_probes = [p for p in kinds.values() if p.kind in ("tail", "head")]
    total_kept = total_refused = 0
    for p in channel_probes:
        chain = int(p.target.split("s")[0][1:])
        kept, refused = per_probe.get(p.id, [0, 0])
        total_kept += kept
        total_refused += refused
        if kept + refused != counts[chain]:
            bad.append((p.target, p.kind, kept, refused, counts[chain]))
    print(
        f"channel records: {total_kept:,} reduced, {total_refused:,} refused and counted, over "
        f"{len(channel_probes)} channel ends; items through the chains: {sum(counts.values()):,}"
    )
    print(
        f"every channel end accounts for its items exactly: {'yes' if not bad else 'NO: ' + str(bad[:3])}"
    )
    print(
        f"monitor lag per frame (ms): median {statistics.median(lag) / 1e6:.1f}, "
        f"max {max(lag) / 1e6:.1f}; {frames:,} frame results written"
    )
    peak = max(s[1] for s in samples)
    verdict = "meets" if peak <= TARGET_MB else "misses"
    print(f"target: monitor RSS <= {TARGET_MB} MB and flat: {verdict} ({peak:.0f} MB at most)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
