"""What monitoring costs a program of many threads, against what the run says it cost.

The program (as people write one): N threads, a ``queue.Queue`` each; its main thread deals 100
items to each queue, then a ``None``; each thread adds its items up. Its own clock gives its
work window (from before the first thread starts to after the last one is joined). Each N runs
plainly, under ``streamscope run`` and under viztracer (the peer: a tracer that also watches
every thread of a program as it is, each call of each), in turn; printed: the median windows,
what monitoring added (as a share of the monitored window, the measured overhead) and the
overhead the run reports (what monitoring cost its threads, as a share of the time the program
ran: ``streamscope run``'s "% of the ... it ran"). The targets: the reported figure within
max(5 points, a third of the measured one), and the monitored window <= 1.5x plain at 500
threads.

    python benchmarks/bench_threads.py [--quick] [--reps N] [--threads N...] [--no-peer]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import streamscope as ss
from _harness import machine, parser, table

PROGRAM = """
import queue, sys, threading, time

def add(q, out, k):
    total = 0
    while (item := q.get()) is not None:
        total += item
    out[k] = total

if __name__ == "__main__":
    n, window = int(sys.argv[1]), sys.argv[2]
    stamps = [time.perf_counter()]
    queues = [queue.Queue(16) for _ in range(n)]
    out = [0] * n
    threads = [threading.Thread(target=add, args=(q, out, k)) for k, q in enumerate(queues)]
    for t in threads:
        t.start()
    stamps.append(time.perf_counter())
    for i in range(100):
        for q in queues:
            q.put(i)
        if i == 0:
            stamps.append(time.perf_counter())
    for q in queues:
        q.put(None)
    for t in threads:
        t.join()
    stamps.append(time.perf_counter())
    assert out == [4950] * n, "lost items"
    with open(window, "w") as f:
        f.write(repr(stamps))
"""

#: The program's phases, between its stamps: its threads started; the first item put into each
#: queue (each channel's first insertion, and each thread's first item); the other 99 items
#: and the ``None``s, and the threads joined.
PHASES = ("start threads", "first items", "other items, join")


#: The ways the program is run: plainly, watched by streamscope, traced by the peer.
PLAIN, STREAMSCOPE, PEER = "plain", "streamscope", "viztracer"


def once(program: Path, n: int, how: str, tmp: Path) -> tuple[list[float], float | None]:
    """The program's own phases (s, ``PHASES``) run ``how``, and for a run of streamscope's
    the overhead it reports."""
    window, out = tmp / "window", tmp / "run.duckdb"
    bin_dir = Path(sys.executable).parent
    head = {
        PLAIN: [sys.executable, str(program)],
        STREAMSCOPE: [str(bin_dir / "streamscope"), "run", str(program), "-o", str(out),
                      "--overwrite", "--quiet", "--"],
        PEER: [str(bin_dir / "viztracer"), "--quiet", "-o", str(tmp / "trace.json"),
               str(program)],
    }[how]  # fmt: skip
    proc = subprocess.run([*head, str(n), str(window)], capture_output=True, text=True,
                          check=False, cwd=tmp, stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{n} threads ({how}) failed:\n{proc.stderr[-2000:]}")
    (tmp / "trace.json").unlink(missing_ok=True)
    stamps = [float(x) for x in window.read_text().strip("[]").split(",")]
    took = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    if how != STREAMSCOPE:
        return took, None
    with ss.load(out) as run:
        rows = run.overhead()
    reported = sum(r["fraction"] or 0.0 for r in rows)  # as ``show`` adds it up
    return took, reported


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=None, help="thread counts")
    ap.add_argument("--no-peer", action="store_true", help="leave viztracer out")
    args = ap.parse_args()
    counts = args.threads or ([100] if args.quick else [500, 2000])
    reps = args.reps or (1 if args.quick else 3)
    hows = [PLAIN, STREAMSCOPE] + ([] if args.no_peer else [PEER])
    print(machine())
    rows, verdicts, phases = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        d = Path(tmp)
        program = d / "threads.py"
        program.write_text(PROGRAM)
        for n in counts:
            runs: dict[str, list[list[float]]] = {h: [] for h in hows}
            said = []
            for r in range(reps):
                for how in hows[r % len(hows) :] + hows[: r % len(hows)]:  # in turn
                    took, reported = once(program, n, how, d)
                    runs[how].append(took)
                    if reported is not None:
                        said.append(reported)
            whole = {h: statistics.median(sum(x) for x in got) for h, got in runs.items()}
            p, m = whole[PLAIN], whole[STREAMSCOPE]
            s = statistics.median(said)
            for k, phase in enumerate(PHASES):
                at = {h: statistics.median(x[k] for x in got) for h, got in runs.items()}
                each = n if k < 2 else 99 * n  # a thread and its queue; an item
                phases.append([str(n), phase, *(f"{at[h] * 1e3:.0f}" for h in hows),
                               f"{(at[STREAMSCOPE] - at[PLAIN]) / each * 1e6:.2f}",
                               "a thread and its queue" if k < 2 else "an item"])  # fmt: skip
            measured = (m - p) / m
            peer = [f"{whole[PEER]:.3f}", f"{whole[PEER] / p:.2f}x"] if PEER in whole else []
            rows.append([str(n), f"{p:.3f}", f"{m:.3f}", f"{m / p:.2f}x", *peer,
                         f"{measured:.1%}", f"{s:.2%}"])  # fmt: skip
            ok = abs(s - measured) <= max(0.05, measured / 3)
            verdicts.append(f"  {n} threads: reported {s:.2%} against {measured:.1%} measured: "
                            f"{'meets' if ok else 'misses'} the target (within max(5 points, a "
                            "third of the measured))")  # fmt: skip
            if n == 500:
                verdicts.append(f"  500 threads: monitored window {m / p:.2f}x plain: "
                                f"{'meets' if m / p <= 1.5 else 'misses'} the target <= 1.5x")  # fmt: skip
    print(f"\nthe program's own work window, median of {reps}")
    peer_cols = ["viztracer s", "ratio"] if PEER in hows else []
    print(table(["threads", "plain s", "streamscope s", "ratio", *peer_cols,
                 "added (measured)", "overhead reported"], rows))  # fmt: skip
    print("\nwhere it goes: each phase's median (ms), and what streamscope added to it")
    print(table(["threads", "phase", *(f"{h} ms" for h in hows), "added us", "per"], phases))
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
