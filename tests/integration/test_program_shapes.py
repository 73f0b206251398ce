"""Shapes of programs people write that streamscope once drew wrong, each run plainly and
under ``streamscope run`` side by side: a helper of theirs named ``pipeline``, ..."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import streamscope as ss
from watched import cli

#: A guard, not a figure: each program takes well under a second plainly.
CAP_S = 120


def both(prog: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    """``python PROG ARGS`` and ``streamscope run PROG -- ARGS``: the two finished runs."""
    runs = []
    for cmd in (
        [sys.executable, str(prog), *args],
        [*cli(), "run", str(prog), "-o", str(out), "--quiet", "--frame", "100ms", "--", *args],
    ):
        runs.append(subprocess.run(
            cmd, capture_output=True, text=True, timeout=CAP_S, check=False,
            stdin=subprocess.DEVNULL, cwd=prog.parent,
        ))  # fmt: skip
    return tuple(runs)


def test_a_helper_named_pipeline_leaves_a_program_a_program(tmp_path: Path) -> None:
    """A program whose own top-level function is called ``pipeline`` (and never imports
    streamscope) is run as a program: watched, ending as plainly, not taken for an app and
    called with arguments it does not take."""
    prog = tmp_path / "etl.py"
    prog.write_text(
        "import queue, sys, threading\n"
        "def clean(inbox, out):\n"
        "    while (item := inbox.get()) is not None:\n"
        "        out.append(item * 2)\n"
        "def pipeline(items, out):\n"
        "    inbox = queue.Queue(8)\n"
        "    worker = threading.Thread(target=clean, args=(inbox, out))\n"
        "    worker.start()\n"
        "    for item in items:\n"
        "        inbox.put(item)\n"
        "    inbox.put(None)\n"
        "    worker.join()\n"
        "if __name__ == '__main__':\n"
        "    out = []\n"
        "    pipeline(range(int(sys.argv[1])), out)\n"
        "    print('cleaned', sum(out))\n"
    )
    plain, monitored = both(prog, tmp_path / "etl.duckdb", "100")
    assert plain.returncode == monitored.returncode == 0, monitored.stderr[-2000:]
    assert monitored.stdout == plain.stdout == "cleaned 9900\n"
    with ss.load(tmp_path / "etl.duckdb") as run:
        assert run.status == "completed", run.error
        assert {c.name for c in run.topology.channels} == {"main -> clean"}
