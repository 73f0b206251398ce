"""Every benchmark still runs (``--quick``) and prints its comparison: a smoke test, not a timing.

No figure is asserted (these machines are noisy); a benchmark that breaks with an API change fails.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("bench_*.py"))
#: What a benchmark's comparison reads like: a ratio to its peer (``1.23x``, ``0.9 x``) or its
#: figure against its target, said met or missed.
COMPARISON = re.compile(
    r"\b\d+(?:\.\d+)?\s?x\b"
    r"|\btarget\b[^\n]*\b(?:meets|met|misses|missed)\b"
    r"|\b(?:meets|met|misses|missed)\b[^\n]*\btarget\b",
    re.IGNORECASE,
)
#: What the smoke test adds to ``--quick`` where that still runs every line of a benchmark: one
#: round of interleaved repetitions rather than three or five (every line of a round is the
#: same in each; the reversed order of later rounds is the harness's, timed by its own tests)
#: and a load run of 1 s (its first and last thirds are still sampled). The smoke runs are a
#: check that each benchmark still runs, not a measurement.
SMOKE_ARGS: dict[str, tuple[str, ...]] = {
    # each variant once, on runs of a fraction of a second: a check that it runs
    "bench_burst_disturbance.py": ("--reps", "1", "--items", "5000"),
    "bench_calibration.py": ("--reps", "1"),
    "bench_host_links.py": ("--reps", "1"),
    "bench_hw_cost.py": ("--plot", os.devnull),  # the page of plots is made, and thrown away
    "bench_load.py": ("--seconds", "1"),
    "bench_overhead.py": ("--reps", "1"),
    "bench_pipeline.py": ("--reps", "1"),
    "bench_probe_core.py": ("--reps", "1", "--events", "5000"),
    "bench_putget.py": ("--reps", "1"),
    "bench_queues.py": ("--reps", "1"),
    "bench_reduction.py": ("--reps", "1"),
    "bench_sim.py": ("--reps", "1"),
    "bench_start.py": ("--reps", "1"),
    "bench_startup.py": ("--reps", "1"),
}


def test_a_comparison_is_told_from_text_without_one() -> None:
    assert COMPARISON.search("overhead 1.23x plain") and COMPARISON.search("ratio 0.9 x")
    assert COMPARISON.search("target: monitor RSS <= 300 MB and flat: meets (191 MB)")
    assert COMPARISON.search("adds 0.589 s (misses the target <= 0.3 s)")
    assert not COMPARISON.search("exported 3 files to /tmp/x and the rest in box")


def test_every_benchmark_is_listed_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    assert [s for s in SCRIPTS if s not in readme] == []


#: Smoke runs go two at a time (each is a process of its own; what they check is that they run,
#: not how fast), the longest first; those that share something run apart: Verilator's build
#: cache, a local Ray cluster. Where the suite runs on several workers (pytest-xdist), one at a
#: time: the other workers' tests have the rest of the machine.
AT_ONCE = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2
APART = (("bench_life.py", "bench_rtl_sim.py"), ("bench_host_links.py", "bench_hosts.py"))
LONGEST = ("bench_host_links.py", "bench_hw_cost.py", "bench_probe_core.py", "bench_vq_sources.py")


@functools.cache
def smoke_runs() -> dict[str, Future[subprocess.CompletedProcess[str]]]:
    """Every benchmark's smoke run, started on first use."""
    locks = {name: lock for group in APART for lock in [threading.Lock()] for name in group}

    def smoke(script: str) -> subprocess.CompletedProcess[str]:
        with locks.get(script) or contextlib.nullcontext():
            return subprocess.run(
                [sys.executable, str(BENCH / script), "--quick", *SMOKE_ARGS.get(script, ())],
                check=False, capture_output=True, text=True, timeout=300,
                stdin=subprocess.DEVNULL, cwd=BENCH.parent,
            )  # fmt: skip

    pool = ThreadPoolExecutor(AT_ONCE, thread_name_prefix="smoke")
    order = sorted(SCRIPTS, key=lambda s: (s not in LONGEST, s))
    runs = {script: pool.submit(smoke, script) for script in order}
    pool.shutdown(wait=False)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str) -> None:
    proc = smoke_runs()[script].result(timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert COMPARISON.search(proc.stdout), proc.stdout[-1500:]


def test_the_smoke_arguments_name_benchmarks_that_exist() -> None:
    assert sorted(set(SMOKE_ARGS) - set(SCRIPTS)) == []
