"""Every benchmark still runs (``--quick``) and prints its comparison: a smoke test, not a timing.

No figure is asserted (these machines are noisy); a benchmark that breaks with an API change fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("bench_*.py"))


def test_every_benchmark_is_listed_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    assert [s for s in SCRIPTS if s not in readme] == []


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "x" in proc.stdout and ("target" in proc.stdout or "ratio" in proc.stdout.lower()), (
        proc.stdout[-1500:]
    )
