"""Queues a program makes as it goes, plain and under ``streamscope run``, side by side.

Three measures:

1. **Queues per second**: a client makes a reply queue per request to a pool of worker
   threads, as fast as it can, plainly and monitored, alternately; the queues made per second
   over the program's own time (from its first request to its last), and the ratio.
2. **The monitor's CPU per new channel**, against 10 and 10,000 channels that already exist: a
   program opens ``existing`` channels (each queue used once and kept), waits for the monitor
   to take them in (1.5 s + 1 ms each), then 3 s (the idle frames), opens ``new`` more, waits
   2 s; the monitor's own CPU per frame (its ``monitor`` table, default 1 s frames) during the
   new ones and the second after, less its CPU per frame while idle, over the new channels.
   The idle CPU per second is printed too: the price of the channels that exist, each reduced
   every frame. The target: the cost of a new channel does not grow with the channels that
   exist (ratio 10,000 : 10 <= 2x).
3. **A task per item**: 2,000 asyncio tasks made in a burst, each computing ~0.5 ms and waiting
   1 ms, plainly and monitored, alternately: the program's own time for them, and the ratio
   (the target: <= 1.5x).

    python benchmarks/bench_queues.py [--quick] [--reps N] [--existing N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = [sys.executable, "-c", "import sys; from streamscope.cli import main; sys.exit(main())"]
TARGET = 2.0
TASKS_TARGET = 1.5
TASKS = Path(__file__).resolve().parents[1] / "tests" / "integration" / "apps" / "task_per_item.py"

#: A client and four workers, a reply queue per request; prints its own time for them.
REQUESTS = r"""
import queue, sys, threading, time
def worker(requests):
    while (req := requests.get()) is not None:
        x, reply = req
        reply.put(x * 2)
def client(requests, n, out):
    t0 = time.perf_counter()
    for i in range(n):
        reply = queue.Queue(1)
        requests.put((i, reply))
        reply.get()
    out.append(time.perf_counter() - t0)
requests = queue.Queue(64)
workers = [threading.Thread(target=worker, args=(requests,)) for _ in range(4)]
for w in workers:
    w.start()
out = []
c = threading.Thread(target=client, args=(requests, int(sys.argv[1]), out))
c.start(); c.join()
for w in workers:
    requests.put(None)
for w in workers:
    w.join()
print(out[0])
"""

#: A program that opens channels and keeps them: each a queue put into by one thread and taken
#: from by another, kept in a list. Prints the times (from its start) its phases began.
CHANNELS = r"""
import queue, sys, threading, time
t0 = time.perf_counter()
def relay(qs, n, out):
    for _ in range(n):
        q = queue.Queue(1)
        q.put(1)
        out.append(q)
def drain(out, n):
    k = 0
    while k < n:
        if k < len(out):
            out[k].get(); k += 1
        else:
            time.sleep(0.0005)
def phase(n, kept):
    out = []
    a = threading.Thread(target=relay, args=(None, n, out), name="maker")
    b = threading.Thread(target=drain, args=(out, n), name="taker")
    a.start(); b.start(); a.join(); b.join()
    kept.extend(out)
kept = []
existing, new = int(sys.argv[1]), int(sys.argv[2])
settle, quiet, after = (float(x) for x in sys.argv[3:6])
phase(existing, kept)
time.sleep(settle)
idle = time.perf_counter() - t0
time.sleep(quiet)
burst = time.perf_counter() - t0
phase(new, kept)
end = time.perf_counter() - t0
time.sleep(after)
print(idle, burst, end, len(kept))
"""


def _run(prog: Path, n: int, monitored: bool, tmp: str) -> subprocess.CompletedProcess[str]:
    """``prog`` with ``n`` as its argument, plainly or under ``streamscope run``."""
    cmd = [sys.executable, str(prog), str(n)]
    if monitored:
        cmd = [*CLI, "run", str(prog), "-o", str(Path(tmp, "run.duckdb")), "--quiet", "--",
               str(n)]  # fmt: skip
    return subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def requests(n: int, monitored: bool) -> float:
    """Queues made per second by the request program, over its own time."""
    with tempfile.TemporaryDirectory(prefix="bench-queues-") as tmp:
        prog = Path(tmp, "requests.py")
        prog.write_text(REQUESTS)
        return n / float(_run(prog, n, monitored, tmp).stdout.split()[-1])


def tasks(n: int, monitored: bool) -> float:
    """The task-per-item program's own time for its ``n`` tasks, in seconds."""
    with tempfile.TemporaryDirectory(prefix="bench-queues-") as tmp:
        err = _run(TASKS, n, monitored, tmp).stderr
        (line,) = [x for x in err.splitlines() if x.startswith("elapsed ")]
        return float(line.split()[1])


def per_channel(existing: int, new: int, quick: bool = False) -> tuple[float, float]:
    """(monitor CPU per new channel in µs, the monitor's idle CPU per second in ms)."""
    # The monitor takes in the channels that exist first (about 1 ms each): the idle frames
    # are measured once it has, over 3 s of 1 s frames (quick: 1 s of 0.5 s frames, at least
    # one whole frame).
    frame_s = 0.5 if quick else 1.0
    settle = (0.5 if quick else 1.5) + existing / 1000
    quiet, after = (1.0, 0.5) if quick else (3.0, 2.0)
    import duckdb

    with tempfile.TemporaryDirectory(prefix="bench-queues-") as tmp:
        prog, out = Path(tmp, "channels.py"), Path(tmp, "c.duckdb")
        prog.write_text(CHANNELS)
        proc = subprocess.run(
            [*CLI, "run", str(prog), "-o", str(out), "--quiet", "--frame", f"{frame_s}s", "--",
             str(existing), str(new), str(settle), str(quiet), str(after)],
            check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        idle, burst, end, _ = (float(x) for x in proc.stdout.split())
        con = duckdb.connect(str(out), read_only=True)
        rows = con.execute("SELECT frame, cpu_ns FROM monitor ORDER BY frame").fetchall()
        frame_ns = int(frame_s * 1e9)
        t_idle = [
            c for f, c in rows if idle <= f * frame_ns / 1e9 and (f + 1) * frame_ns / 1e9 <= burst
        ]
        # The burst's frames, and the second after it (what it declared is reduced then).
        t_new = [c for f, c in rows if burst <= f * frame_ns / 1e9 < end + 1.0]
        idle_per_frame = statistics.median(t_idle) if t_idle else 0.0
        extra = sum(t_new) - idle_per_frame * len(t_new)
        return max(extra, 0.0) / new / 1e3, idle_per_frame * 1e9 / frame_ns / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts: a check that it runs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--existing", type=int, default=10_000, help="the larger set of channels")
    args = ap.parse_args()
    n_req = 200 if args.quick else 5000
    plain, watched = [], []
    for _ in range(args.reps):
        plain.append(requests(n_req, False))
        watched.append(requests(n_req, True))
    p, w = statistics.median(plain), statistics.median(watched)
    print(f"queues made per second (a reply queue per request, {n_req} requests)")
    print(f"  plain {p:,.0f}/s   monitored {w:,.0f}/s   ratio {p / w:.2f}x")
    n_tasks = 100 if args.quick else 2000
    t_plain, t_watched = [], []
    for _ in range(args.reps):
        t_plain.append(tasks(n_tasks, False))
        t_watched.append(tasks(n_tasks, True))
    tp, tw = statistics.median(t_plain), statistics.median(t_watched)
    verdict = "meets" if tw / tp <= TASKS_TARGET else "misses"
    print(f"a task per item ({n_tasks} tasks), the program's own time")
    print(f"  plain {tp:.3f} s   monitored {tw:.3f} s   ratio {tw / tp:.2f}x "
          f"({verdict} the target <= {TASKS_TARGET}x)")  # fmt: skip
    new = 100 if args.quick else 2000
    sizes = (10, 100) if args.quick else (10, args.existing)
    costs = {}
    print(f"monitor CPU per new channel ({new} new channels, kept)")
    for existing in sizes:
        runs = [per_channel(existing, new, args.quick) for _ in range(args.reps)]
        costs[existing] = statistics.median(c for c, _ in runs)
        idle = statistics.median(i for _, i in runs)
        print(f"  beside {existing:>6} channels: {costs[existing]:8.1f} us per new channel "
              f"(idle: {idle:.1f} ms of CPU per s)")  # fmt: skip
    lo, hi = costs[sizes[0]], costs[sizes[1]]
    ratio = hi / lo if lo > 0 else float("inf")
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"  {sizes[1]} : {sizes[0]} existing = {ratio:.2f}x ({verdict} the target <= {TARGET}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
