"""``streamscope retime`` on the run files ``streamscope run`` writes of programs run as they
are, whose queries may match nothing (a default one for event loops the program never had, or
one the user wrote): each is re-timed, and reads back as before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import streamscope as ss
from watched import cli

#: A threaded program with one queue and no event loop.
_PROGRAM = """
import queue, threading
q = queue.Queue(4)
def produce():
    for i in range(300):
        q.put(i)
    q.put(None)
def consume():
    total = 0
    while (x := q.get()) is not None:
        total += x
    print(total)
workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
for w in workers:
    w.start()
for w in workers:
    w.join()
"""


def _figures(out: Path) -> tuple[str, list[tuple[str, int]], list[tuple[object, ...]]]:
    """What a reader of the run sees: its status, its queries (with how many targets each
    matched) and every figure of its frames."""
    with ss.load(out) as run:
        queries = [(q.text, len(q.targets)) for q in run.queries]
        _, rows = run.sql("SELECT * FROM stat ORDER BY ALL")
        return run.status, queries, rows


@pytest.mark.parametrize(
    "queries",
    [[], ["-q", "occupancy(* -> *): mean", "-q", "latency(nobody -> nowhere): mean"]],
    ids=["defaults", "one-written-matches-nothing"],
)
def test_retime_takes_a_programs_run_whose_queries_matched_nothing(
    tmp_path: Path, queries: list[str]
) -> None:
    app, out = tmp_path / "prog.py", tmp_path / "out.duckdb"
    app.write_text(_PROGRAM)
    run = subprocess.run(
        [*cli(), "run", str(app), "-o", str(out), "--quiet", *queries],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == f"{sum(range(300))}\n"
    status, recorded, figures = _figures(out)
    assert status == "completed" and figures
    # the premise: the run holds a query that matched nothing (by default, the event loops' lag)
    unmatched = [text for text, n in recorded if n == 0]
    assert unmatched == (["timer(loop*.lag): mean, max"] if not queries else
                         ["latency(nobody -> nowhere): mean"])  # fmt: skip
    retimed = subprocess.run(
        [*cli(), "retime", str(out)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert retimed.returncode == 0, retimed.stderr[-3000:]
    assert retimed.stdout.startswith(f"{out}: "), retimed.stdout
    assert _figures(out) == (status, recorded, figures)
    shown = subprocess.run(
        [*cli(), "show", str(out)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert shown.returncode == 0 and "produce -> consume" in shown.stdout, shown.stderr[-3000:]
