"""Every benchmark still runs (``--quick``) and prints its comparison: a smoke test, not a timing.

No figure is asserted (these machines are noisy); a benchmark that breaks with an API change fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
#: What the smoke test adds to ``--quick`` where that still runs every line of a benchmark: two
#: interleaved rounds (the second in reverse order, as every further one) rather than three or
#: five; one round of the two benchmarks whose rounds are whole monitored runs (every line of a
#: round is the same in each; the reversed order is the harness's, run by the others); and a
#: load run of 2 s (its first and last thirds are still sampled).
SMOKE_ARGS: dict[str, tuple[str, ...]] = {
    "bench_calibration.py": ("--reps", "2"),
    "bench_hw_cost.py": ("--plot", os.devnull),  # the page of plots is made, and thrown away
    "bench_load.py": ("--seconds", "2"),
    "bench_overhead.py": ("--reps", "1"),
    "bench_pipeline.py": ("--reps", "1"),
    "bench_probe_core.py": ("--reps", "2"),
    "bench_putget.py": ("--reps", "2"),
    "bench_reduction.py": ("--reps", "2"),
    "bench_sim.py": ("--reps", "2"),
    "bench_startup.py": ("--reps", "2"),
}


def test_a_comparison_is_told_from_text_without_one() -> None:
    assert COMPARISON.search("overhead 1.23x plain") and COMPARISON.search("ratio 0.9 x")
    assert COMPARISON.search("target: monitor RSS <= 300 MB and flat: meets (191 MB)")
    assert COMPARISON.search("adds 0.589 s (misses the target <= 0.3 s)")
    assert not COMPARISON.search("exported 3 files to /tmp/x and the rest in box")


def test_every_benchmark_is_listed_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    assert [s for s in SCRIPTS if s not in readme] == []


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *SMOKE_ARGS.get(script, ())],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert COMPARISON.search(proc.stdout), proc.stdout[-1500:]


def test_the_smoke_arguments_name_benchmarks_that_exist() -> None:
    assert sorted(set(SMOKE_ARGS) - set(SCRIPTS)) == []
