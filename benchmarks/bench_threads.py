"""What monitoring costs a program of many threads, against what the run says it cost.

The program (as people write one): N threads, a ``queue.Queue`` each; its main thread deals 100
items to each queue, then a ``None``; each thread adds its items up. Its own clock gives its
work window (from before the first thread starts to after the last one is joined). Each N runs
plainly and under ``streamscope run``, alternately; printed: the median windows, what monitoring
added (as a share of the monitored window, the measured overhead) and the overhead the run
reports (what monitoring cost its threads, as a share of the time the program ran:
``streamscope run``'s "% of the ... it ran"). The targets: the reported figure within
max(5 points, a third of the measured one), and the monitored window <= 1.5x plain at 500
threads.

    python benchmarks/bench_threads.py [--quick] [--reps N] [--threads N...]
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
    t0 = time.perf_counter()
    queues = [queue.Queue(16) for _ in range(n)]
    out = [0] * n
    threads = [threading.Thread(target=add, args=(q, out, k)) for k, q in enumerate(queues)]
    for t in threads:
        t.start()
    for i in range(100):
        for q in queues:
            q.put(i)
    for q in queues:
        q.put(None)
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    assert out == [4950] * n, "lost items"
    with open(window, "w") as f:
        f.write(repr(took))
"""


def once(program: Path, n: int, monitored: bool, tmp: Path) -> tuple[float, float | None]:
    """The program's own work window (s), and for a monitored run the overhead it reports."""
    window, out = tmp / "window", tmp / "run.duckdb"
    cli = [str(Path(sys.executable).with_name("streamscope")), "run"]
    head = [*cli, str(program), "-o", str(out), "--overwrite", "--quiet", "--"] if monitored else [
        sys.executable, str(program)]  # fmt: skip
    proc = subprocess.run([*head, str(n), str(window)], capture_output=True, text=True,
                          check=False, cwd=tmp, stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{n} threads ({'monitored' if monitored else 'plain'}) failed:\n"
                         f"{proc.stderr[-2000:]}")  # fmt: skip
    took = float(window.read_text())
    if not monitored:
        return took, None
    with ss.load(out) as run:
        rows = run.overhead()
    reported = sum(r["fraction"] or 0.0 for r in rows)  # as ``show`` adds it up
    return took, reported


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=None, help="thread counts")
    args = ap.parse_args()
    counts = args.threads or ([100] if args.quick else [500, 2000])
    reps = args.reps or (1 if args.quick else 3)
    print(machine())
    rows, verdicts = [], []
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        d = Path(tmp)
        program = d / "threads.py"
        program.write_text(PROGRAM)
        for n in counts:
            plain, mon, said = [], [], []
            for r in range(reps):
                for monitored in (False, True) if r % 2 == 0 else (True, False):
                    took, reported = once(program, n, monitored, d)
                    (mon if monitored else plain).append(took)
                    if reported is not None:
                        said.append(reported)
            p, m, s = statistics.median(plain), statistics.median(mon), statistics.median(said)
            measured = (m - p) / m
            rows.append([str(n), f"{p:.3f}", f"{m:.3f}", f"{m / p:.2f}x", f"{measured:.1%}",
                         f"{s:.2%}"])  # fmt: skip
            ok = abs(s - measured) <= max(0.05, measured / 3)
            verdicts.append(f"  {n} threads: reported {s:.2%} against {measured:.1%} measured: "
                            f"{'meets' if ok else 'misses'} the target (within max(5 points, a "
                            "third of the measured))")  # fmt: skip
            if n == 500:
                verdicts.append(f"  500 threads: monitored window {m / p:.2f}x plain: "
                                f"{'meets' if m / p <= 1.5 else 'misses'} the target <= 1.5x")  # fmt: skip
    print(f"\nthe program's own work window, median of {reps}")
    print(table(["threads", "plain s", "monitored s", "ratio", "added (measured)",
                 "overhead reported"], rows))  # fmt: skip
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
