"""Every benchmark still runs (``--quick``) and prints its comparison: a smoke test, not a timing.

No figure is asserted (these machines are noisy); a benchmark that breaks with an API change fails.
"""

from __future__ import annotations

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
        [sys.executable, str(BENCH / script), "--quick"],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert COMPARISON.search(proc.stdout), proc.stdout[-1500:]
