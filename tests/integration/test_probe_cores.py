"""The same run recorded by the native probe core and by its pure-Python twin: the command line,
real processes, the same figures.

``STREAMSCOPE_PURE_PYTHON=1`` makes every process of a run (the application's, its stage
processes', the monitor's) use the twin; both cores must account for every item exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import streamscope as ss
from streamscope.core import native

APP = Path(__file__).parent / "apps" / "steady.py"
ITEMS = 300
QUERIES = [
    "count(src -> work): sum every 100ms",
    "throughput(work -> sink): mean every 100ms",
    "state(work): duty every 100ms",
]


def _run(tmp: Path, name: str, pure: bool) -> Path:
    out = tmp / f"{name}.duckdb"
    env = {k: v for k, v in os.environ.items() if k != "STREAMSCOPE_PURE_PYTHON"}
    if pure:
        env["STREAMSCOPE_PURE_PYTHON"] = "1"
    args = [sys.executable, "-m", "streamscope", "run", str(APP), "--out", str(out), "--quiet"]
    for q in QUERIES:
        args += ["-q", q]
    args += ["--", "--items", str(ITEMS), "--gap-ms", "0.5"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def _figures(path: Path, core: str) -> tuple[int, int, int]:
    with ss.load(path) as run:
        assert run.meta.probe_core == core
        counted = run.sql("SELECT sum(value) FROM stat WHERE query_id = 0 AND stat = 'sum'")
        refused = sum(d.dropped for d in run.drops())
        recorded = sum(d.recorded for d in run.drops())
        return int(counted[1][0][0]), refused, recorded


@pytest.mark.skipif("native" not in native.implementations(), reason="no native core built")
def test_the_native_core_and_its_twin_record_the_same_run(tmp_path: Path) -> None:
    native_run = _figures(_run(tmp_path, "native", pure=False), "native")
    twin_run = _figures(_run(tmp_path, "twin", pure=True), "python")
    # Every insertion counted, nothing refused, by either core; the channel and state records
    # they kept are as many (state changes follow the stage's waits, which the timing decides,
    # so only the channel ends are compared exactly).
    assert native_run[0] == twin_run[0] == ITEMS
    assert native_run[1] == twin_run[1] == 0
    assert native_run[2] > 2 * ITEMS and twin_run[2] > 2 * ITEMS
