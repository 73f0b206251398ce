"""A program that forks while its threads claim their stages does not hang under the monitor.

``examples/programs/pool_rounds.py`` makes a ``multiprocessing.Pool(2)`` each round while a
new consumer thread makes its first ``get``: the fork copies whatever lock of ours that thread
holds at that instant, and a worker that found one held would wait on it forever
(``core.forksafe``). 50 rounds plainly and under ``streamscope run``: the same output, and the
run's stages are the program's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import streamscope as ss
from watched import cli

PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "programs" / "pool_rounds.py"
#: A guard, not a figure: the program takes a second or two plainly, the same monitored.
CAP_S = 120


def test_fifty_pools_forked_while_a_thread_claims_its_stage(tmp_path: Path) -> None:
    plain = subprocess.run(
        [sys.executable, str(PROGRAM), "50"], capture_output=True, text=True, timeout=CAP_S,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = tmp_path / "rounds.duckdb"
    monitored = subprocess.run(
        [*cli(), "run", str(PROGRAM), "-o", str(out), "--quiet", "--", "50"],
        capture_output=True, text=True, timeout=CAP_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert monitored.returncode == 0, monitored.stderr[-3000:]
    assert monitored.stdout == plain.stdout == "total 15475\n"
    with ss.load(out) as run:
        assert run.status == "completed", run.error
        names = {s.name for s in run.topology.stages}
        assert {"main", "consume", "square"} <= names, names
