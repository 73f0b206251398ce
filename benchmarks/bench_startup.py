"""What monitoring adds before the first item flows (target: at most 0.3 s).

In: nothing (a three-stage pipeline of threads written to small app files at start). Out: for
each way of starting it, the time from just before its process is started to the first item
its source emits (wall clock; each in a fresh process, interleaved repetitions): the stages
as hand-written threads with ``queue.Queue`` (``python plain.py``), the same stages as a
``Pipeline`` monitored from Python (``python api.py``: ``import streamscope``, ``ss.run``) and
from the command line (``streamscope run app.py``), every channel and stage watched; the added
time is each one's median minus the hand-written threads'.

    python benchmarks/bench_startup.py [--quick] [--reps N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import interleave, machine, parse_args, table

TARGET_S = 0.3

_STAGES = """
import time
STAMP = {stamp!r}
N = 2000

def first_item():
    with open(STAMP, "w") as f:
        f.write(str(time.time_ns()))

def work(x):
    return x * 2

def done(x):
    pass
"""

PLAIN = (
    _STAGES
    + """
import queue, threading
q1, q2 = queue.Queue(64), queue.Queue(64)

def source():
    for i in range(N):
        if i == 0:
            first_item()
        q1.put(i)
    q1.put(None)

def middle():
    while (x := q1.get()) is not None:
        q2.put(work(x))
    q2.put(None)

def sink():
    while (x := q2.get()) is not None:
        done(x)

threads = [threading.Thread(target=f) for f in (source, middle, sink)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""
)

PIPELINE = (
    _STAGES
    + """
import streamscope as ss

def source():
    for i in range(N):
        if i == 0:
            first_item()
        yield i

def pipeline(argv):
    p = ss.Pipeline("startup")
    p.add("source", source)
    p.add("middle", work)
    p.add("sink", done)
    p.chain("source", "middle", "sink", capacity=64)
    return p

QUERIES = ["occupancy(* -> *): mean", "throughput(* -> *): mean", "state(*): duty"]
"""
)

API = (
    PIPELINE
    + """
if __name__ == "__main__":
    from pathlib import Path
    res = ss.run(pipeline([]), QUERIES, ss.RunOptions(out=Path({out!r}), overwrite=True))
    assert res.status == "completed", res.error
"""
)


def launch(cmd: list[str], stamp: Path) -> Callable[[], tuple[float]]:
    def run() -> tuple[float]:
        stamp.unlink(missing_ok=True)
        t0 = time.time_ns()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not stamp.exists():
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-1500:]}")
        return ((int(stamp.read_text()) - t0) / 1e9,)

    return run


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (3 if args.quick else 15)
    print(machine())
    cli = Path(sys.executable).with_name("streamscope")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        d = Path(tmp)
        stamps = {k: d / f"{k}.stamp" for k in ("plain", "api", "cli")}
        (d / "plain.py").write_text(PLAIN.format(stamp=str(stamps["plain"])))
        (d / "api.py").write_text(API.format(stamp=str(stamps["api"]), out=str(d / "api.duckdb")))
        (d / "app.py").write_text(PIPELINE.format(stamp=str(stamps["cli"])))
        variants = [
            ("threads + queue.Queue (python plain.py)", launch([sys.executable, str(d / "plain.py")], stamps["plain"])),
            ("ss.run, monitored (python api.py)", launch([sys.executable, str(d / "api.py")], stamps["api"])),
            (
                "streamscope run app.py",
                launch(
                    [str(cli), "run", str(d / "app.py"), "--out", str(d / "cli.duckdb"),
                     "--overwrite", "--quiet"],
                    stamps["cli"],
                ),
            ),
        ]  # fmt: skip
        (results,) = interleave(variants, reps)
    base = results[0].median
    rows = [
        [s.name, f"{s.median:.3f}", f"{min(s.samples):.3f}..{max(s.samples):.3f}",
         f"{s.median - base:+.3f}"]
        for s in results
    ]  # fmt: skip
    print(f"\nseconds from starting the process to the first item, {reps} repetitions")
    print(table(["how it starts", "median s", "range", "added s"], rows))
    for s in results[1:]:
        added = s.median - base
        print(
            f"  {s.name}: adds {added:.3f} s ({'meets' if added <= TARGET_S else 'misses'} "
            f"the target <= {TARGET_S} s)"
        )
    print(
        "(the monitor process starts beside the first items: its imports and the run file are "
        f"not waited for; median of the spread {statistics.median(s.spread for s in results):.0%})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
