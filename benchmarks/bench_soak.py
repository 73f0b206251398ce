"""A service watched for a long time: the monitor's memory stays flat, the run file bounded.

The program (as people write one): three threads, a source that paces RATE items a second into
a ``queue.Queue``, a stage that passes them on to a second queue, a sink that takes them; it
runs for the given time under ``streamscope run --frame 10ms --keep KEEP`` (10 ms frames for an
hour are some four days of 1 s frames). Sampled every few seconds: the monitor process's RSS,
its CPU and the run file's size (with its log). Printed: the median RSS in each quarter of
the run and its fitted slope after the first (MB/h, with its standard error), the file's size
at each quarter, two-thirds in and once the run ended, the frames per target, the
monitor's lag over its last frames against a frame, and the peer: the same program without
``--keep`` for a tenth of the time (at least 20 s), whose file grows without bound (its MB a
minute, and the ratio of what the whole run would have written to what ``--keep`` keeps).
Samples are taken while the program runs (not while the monitor finishes the run after it).
Targets: RSS flat: the median of the last quarter of the run within max(2 MB, 2 %) of the
second's (the first quarter is warm-up; a single sample swings by a frame's passing arrays);
the file bounded: no larger at the end (within 10 %) than two-thirds in, or once the levels
below the last the run reaches were full if that is later (``store.retention.level_age_ns``: at
``--keep 30s``, 34.5 min in; from then on only the coarsest level grows, by a frame per target
every 41 s, into blocks the roll-ups freed); the lag at the end within a frame.

    python benchmarks/bench_soak.py [--quick] [--minutes M] [--rate N] [--keep DURATION]
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil

import streamscope as ss
from _harness import machine, parser
from streamscope.query.units import parse_duration
from streamscope.store.retention import level_age_ns

PROGRAM = """
import json, queue, sys, threading, time

def source(q, until, rate, counted):
    n, t = 0, time.monotonic()
    per_tick = max(1, rate // 100)
    while t < until:
        for _ in range(per_tick):
            q.put(n)
            n += 1
        t += 0.01
        time.sleep(max(0.0, t - time.monotonic()))
    q.put(None)
    counted["put"] = n

def stage(inq, outq):
    while (item := inq.get()) is not None:
        outq.put(item * 2)
    outq.put(None)

def sink(q, counted):
    got = 0
    while q.get() is not None:
        got += 1
    counted["got"] = got

if __name__ == "__main__":
    seconds, rate, truth = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    q1, q2, counted = queue.Queue(1024), queue.Queue(1024), {}
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=source, args=(q1, until, rate, counted)),
               threading.Thread(target=stage, args=(q1, q2)),
               threading.Thread(target=sink, args=(q2, counted))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(truth, "w") as f:
        json.dump(counted, f)
"""

MB = 1e6
#: The frame the service is watched with (``--frame``): 10 ms, a hundred times the default's
#: frames in the same time.
FRAME = "10ms"


def _monitor(cli: psutil.Process) -> psutil.Process | None:
    """The run's monitor: the command's child that runs ``streamscope.monitor`` (a fork of the
    command named ``streamscope-mon``, or a process of its own)."""
    for child in cli.children(recursive=True):
        try:
            if child.name() == "streamscope-mon" or "streamscope.monitor" in " ".join(
                child.cmdline()
            ):
                return child
        except psutil.Error:
            continue
    return None


def _file_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in (out, out.with_name(out.name + ".wal")) if p.exists())


def soak(
    tmp: Path, seconds: float, rate: int, keep: str | None, every_s: float, frame: str
) -> dict:
    """One run of the program under ``streamscope run --metrics``; its samples (while the
    program runs: the monitor's RSS and CPU, the file's size, the lag its metrics say) and what
    its file says."""
    prog, out, truth = tmp / "service.py", tmp / f"soak-{keep}.duckdb", tmp / "truth.json"
    prog.write_text(PROGRAM)
    truth.unlink(missing_ok=True)
    cli = [str(Path(sys.executable).with_name("streamscope")), "run", str(prog), "-o", str(out),
           "--overwrite", "--quiet", "--frame", frame, *(["--keep", keep] if keep else []),
           "--metrics", "0", "--", str(seconds), str(rate), str(truth)]  # fmt: skip
    proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, cwd=tmp)  # fmt: skip
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr or ()), daemon=True)
    reader.start()
    samples: list[tuple[float, float, float, int, float]] = []  # t, rss, cpu, bytes, lag
    t0 = time.monotonic()
    mon = None
    while proc.poll() is None and not truth.exists():  # the program's own end: its truth
        time.sleep(every_s)
        if proc.poll() is not None or truth.exists():
            break  # the program ended meanwhile: the monitor is finishing the run, not watching
        try:
            mon = (
                mon if mon is not None and mon.is_running() else _monitor(psutil.Process(proc.pid))
            )
            if mon is None:
                continue
            cpu = mon.cpu_times()
            samples.append((time.monotonic() - t0, mon.memory_info().rss / MB,
                            cpu.user + cpu.system, _file_bytes(out), _lag_s(said)))  # fmt: skip
        except psutil.Error:
            continue
    proc.wait()
    reader.join(5)
    if proc.returncode != 0:
        raise SystemExit(f"the soak run failed ({proc.returncode}):\n{''.join(said)[-2000:]}")
    counted = json.loads(truth.read_text())
    with ss.load(out) as run:
        per_target = [int(n) for _, n in run.sql(
            "SELECT query_id || target, count(*) FROM frame GROUP BY 1")[1]]  # fmt: skip
        duration_s = run.duration_ns / 1e9
    return {"samples": samples, "counted": counted, "frames": max(per_target, default=0),
            "end_bytes": _file_bytes(out), "duration_s": duration_s}  # fmt: skip


def _lag_s(said: list[str]) -> float:
    """The monitor's lag now, as its metrics endpoint says it (NaN: not known yet)."""
    url = next((ln.split()[-1] for ln in said if ln.startswith("metrics: ")), None)
    if url is None:
        return math.nan
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return math.nan
    found = re.search(r"^streamscope_monitor_lag_seconds\{[^}]*\} (\S+)$", text, re.M)
    return float(found[1]) if found else math.nan


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if len(values) else math.nan


def _duration_ms(text: str) -> float:
    return parse_duration(text) / 1e6


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="how long the service runs")
    ap.add_argument("--rate", type=int, default=20_000, help="items a second through it")
    ap.add_argument("--keep", default="30s", help="--keep of the watched run")
    ap.add_argument("--frame", default=FRAME, help="--frame of the watched run")
    args = ap.parse_args()
    seconds = 6.0 if args.quick else args.minutes * 60
    keep = "2s" if args.quick else args.keep
    every = 0.5 if args.quick else 5.0
    print(machine())
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        kept = soak(tmp, seconds, args.rate, keep, every, args.frame)
        peer_s = max(20.0, seconds / 10) if not args.quick else 2.0
        peer = soak(tmp, peer_s, args.rate, None, every, args.frame)
    s = np.array(kept["samples"], dtype=np.float64)
    if len(s) < 4:
        raise SystemExit("too few samples of the monitor: was it found?")
    end_s = s[-1, 0]
    # warm-up: the first quarter; the memory is judged by the median of each later quarter
    # (one sample is a frame's passing arrays: ±10 MB at 10 ms frames)
    warm = s[:, 0] >= end_s / 4
    t_h, rss = s[warm, 0] / 3600, s[warm, 1]
    slope, err = float("nan"), float("nan")
    if len(t_h) >= 3:
        (slope, _), cov = np.polyfit(t_h, rss, 1, cov=True)
        err = float(np.sqrt(cov[0, 0]))
    quarters = [_median(s[(s[:, 0] >= end_s * q / 4) & (s[:, 0] <= end_s * (q + 1) / 4), 1])
                for q in range(4)]  # fmt: skip
    grown = quarters[3] - quarters[1]
    # the file: its size at each quarter of the run, and whether it stopped growing once the
    # finer levels were full (from then on only the coarsest level grows, a frame per target
    # every 16**level frames; DuckDB reuses the blocks the roll-ups free)
    keep_ns = parse_duration(keep)
    full = [level_age_ns(keep_ns, k) / 1e9 for k in range(8)]
    filled = max([t for t in full if t <= 0.75 * end_s], default=end_s / 4)
    sizes = [s[min(np.searchsorted(s[:, 0], end_s * q / 4), len(s) - 1), 3] for q in range(5)]
    third = s[min(np.searchsorted(s[:, 0], max(filled, end_s * 2 / 3)), len(s) - 1)]
    cpu_share = (s[-1, 2] - s[0, 2]) / max(s[-1, 0] - s[0, 0], 1e-9)
    frame_ms = _duration_ms(args.frame)
    lags = s[warm, 4] * 1e3
    tenth = max(1, len(lags) // 10)
    lag_start, lag_end = np.nanmedian(lags[:tenth]), np.nanmedian(lags[-tenth:])
    print(f"\nthe service: {args.rate:,} items/s through 3 stages, {seconds / 60:g} min, frames "
          f"of {args.frame}, --keep {keep}; {kept['counted']['put']:,} items put, "
          f"{kept['counted']['got']:,} taken; {len(s)} samples of the monitor while it ran")  # fmt: skip
    print("monitor RSS, median of each quarter of the run: "
          + ", ".join(f"{r:.1f}" for r in quarters) + " MB")  # fmt: skip
    print(f"monitor RSS after the first quarter: {grown:+.2f} MB from the second quarter to the "
          f"last; fitted slope {slope:+.2f} ± {err:.2f} MB/h; its CPU {cpu_share * 100:.1f} % of "
          f"a core")  # fmt: skip
    print("run file at each quarter: " + ", ".join(f"{b / MB:.2f}" for b in sizes) + " MB; "
          f"{third[3] / MB:.2f} MB at {third[0]:.0f} s (the finer levels full at {filled:.0f} s), "
          f"{kept['end_bytes'] / MB:.2f} MB once the run ended; {kept['frames']} frames per "
          "target at most")  # fmt: skip
    print(f"monitor lag (its metrics, every {every:g} s): {lag_start:.1f} ms typical over the "
          f"first tenth after warm-up, {lag_end:.1f} ms over the last, {np.nanmax(lags):.1f} ms "
          f"at most (a frame: {frame_ms:g} ms)")  # fmt: skip
    per_min = peer["end_bytes"] / MB / (peer["duration_s"] / 60)
    whole = per_min * seconds / 60
    print(f"peer without --keep ({peer['duration_s']:.0f} s): {per_min:.2f} MB a minute, "
          f"{whole:.1f} MB over the whole run: {whole / max(kept['end_bytes'] / MB, 1e-9):.1f}x "
          f"what --keep kept")  # fmt: skip
    flat = abs(grown) <= max(2.0, 0.02 * quarters[1])
    bounded = s[-1, 3] <= 1.1 * third[3]
    on_time = lag_end <= lag_start + frame_ms
    for what, ok in (("monitor RSS flat", flat), ("run file bounded", bounded),
                     ("no later at the end than at the start, within a frame", on_time)):  # fmt: skip
        print(f"  target: {what}: {'meets' if ok else 'misses'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
