"""What a run found, said where people look: the end of ``streamscope run``, ``show``, and
``show --json`` (``report/said.py``), on the README's quick start (a program run as it is) and on
a pipeline written for streamscope (whose bottleneck finding quotes the what-if)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import README, saved_files

from watched import cli

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli(), *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
        stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's program, run as the README says: its run file and what ``run`` said of it
    (on standard error: the program's output is its own)."""
    tmp = tmp_path_factory.mktemp("said")
    (tmp / "prog.py").write_text(saved_files(README)["prog.py"])
    proc = _cli("run", "prog.py", "--out", "prog.duckdb", cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "total 1999000" in proc.stdout
    return tmp / "prog.duckdb", proc.stderr


def test_run_ends_with_the_top_findings(quick_start: tuple[Path, str]) -> None:
    """Without --report, the run's end says the bottleneck, with what to do about it and what
    the obvious change would gain, in the program's own terms: a second thread running
    ``server`` (whose 1 ms an item is a sleep, which holds no lock) about doubles the rate."""
    _, out = quick_start
    said = out[out.index("findings") :]
    assert "problem: stage server is rate-limiting" in said, said
    assert "give server more parallelism" in said
    assert out.index("findings") < out.index("run file:")
    (quote,) = [line.strip() for line in said.splitlines() if "what if:" in line]
    assert quote.startswith("what if: server.replicas=2 (2 threads running server): "), quote
    was, now = (float(x.replace(",", "")) for x in re.findall(r"([\d,.]+)(?: →| items/s)", quote))
    assert 1.8 < now / was < 2.1, quote


def test_run_prints_what_its_monitor_process_wrote_of_the_file(
    quick_start: tuple[Path, str],
) -> None:
    """The summary and findings at the end of ``run`` are the monitor process's: written as
    ``said_text`` writes them from the run file for the command's console (200 columns, not a
    terminal: no colour), and printed as they are, between the run's start and its file."""
    from streamscope.report.said import said_text
    from streamscope.store.reader import load

    run_file, out = quick_start
    with load(run_file) as run:
        summary, found = said_text(run, (200, None, False))
    assert summary.lstrip().startswith("summary of prog (completed)") and found.startswith(
        "findings"
    )
    assert summary + found in out
    assert out.rstrip().endswith(f"run file: {run_file.name}")


def test_the_monitor_process_writes_the_summary_for_the_console_it_is_given(
    tmp_path: Path,
) -> None:
    """A program run with ``summary_console`` set: the result carries what the monitor process
    wrote (``extra["said"]``), the run file read as that console shows it; without it nothing
    is written (the command reads the file itself)."""
    from streamscope.core.options import RunOptions
    from streamscope.report.said import said_text
    from streamscope.runtime.program import run_program
    from streamscope.store.reader import load

    prog = tmp_path / "two.py"
    prog.write_text(
        "import queue, threading\n"
        "q = queue.Queue(4)\n"
        "t = threading.Thread(target=lambda: [q.get() for _ in range(50)])\n"
        "t.start()\n"
        "for i in range(50):\n    q.put(i)\n"
        "t.join()\n"
    )
    style = (90, "256", True)
    opts = RunOptions(out=tmp_path / "two.duckdb", summary_console=style)
    result = run_program(str(prog), [], [], opts)
    assert result.status == "completed" and result.program_exit == 0
    summary, found = result.extra["said"]
    with load(tmp_path / "two.duckdb") as run:
        assert (summary, found) == said_text(run, style)
    assert "\x1b[" in summary  # a terminal's colours, as asked
    assert max(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in summary.splitlines()) <= 90
    plain = run_program(str(prog), [], [], RunOptions(out=tmp_path / "plain.duckdb"))
    assert "said" not in plain.extra


def test_show_prints_them_and_show_json_carries_every_one(quick_start: tuple[Path, str]) -> None:
    run_file, _ = quick_start
    shown = _cli("show", str(run_file), cwd=run_file.parent)
    assert shown.returncode == 0, shown.stderr
    assert "problem: stage server is rate-limiting" in shown.stdout
    doc = json.loads(_cli("show", "--json", str(run_file), cwd=run_file.parent).stdout)
    found = doc["findings"]
    top = found[0]
    assert (top["kind"], top["severity"], top["target"]) == ("bottleneck", "problem", "server")
    assert top["evidence"]["busy"] >= 0.8
    assert {f["kind"] for f in found} >= {"bottleneck", "littles_law"}
    severities = [f["severity"] for f in found]
    assert severities == sorted(severities, key=["problem", "warning", "info"].index)
    # A program's run has a what-if too: its model checked against the run, its predictions.
    whatif = doc["whatif"]
    assert whatif["why_not"] == "" and whatif["check"].startswith("The program's model reproduces")
    changes = [p["changes"] for p in whatif["predictions"]]
    assert ["server.replicas=2"] in changes and ["server.speed=2x"] in changes, changes


def test_the_report_of_a_program_has_its_what_if(quick_start: tuple[Path, str]) -> None:
    """The report's "What if" section is there for a program run as it is, in its terms."""
    run_file, _ = quick_start
    page = run_file.parent / "prog.html"
    made = _cli("report", str(run_file), "-o", str(page), cwd=run_file.parent)
    assert made.returncode == 0, made.stderr
    html = page.read_text()
    section = html[html.index(">What if<") :]
    assert "2 threads running server" in section
    assert "The program&#x27;s model reproduces this run" in section or (
        "The program's model reproduces this run" in section
    )


def test_a_pipelines_bottleneck_finding_quotes_the_what_if(tmp_path: Path) -> None:
    """A pipeline written for streamscope (the guide's): the bottleneck's line at the end of
    ``run`` carries what the obvious change would gain, as ``whatif`` predicts it, and
    ``show --json``'s ``whatif`` holds that prediction."""
    app = tmp_path / "app.py"
    guide = saved_files(ROOT / "docs" / "guide.md")
    app.write_text(guide["app.py"])
    proc = _cli("run", "app.py", "--out", "app.duckdb", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stdout[proc.stdout.index("findings") :]  # (an app's: on standard output)
    assert "stage server is rate-limiting" in said, said
    quotes = [line.strip() for line in said.splitlines() if "what if:" in line]
    doc = json.loads(_cli("show", "--json", "app.duckdb", cwd=tmp_path).stdout)
    whatif = doc["whatif"]
    if whatif["why_not"]:  # the model's self-check refused this run (it may, now and then)
        assert not quotes and not whatif["predictions"], (quotes, whatif)
        assert "does not reproduce the run" in whatif["why_not"]
        return
    (quote,) = quotes
    assert quote.startswith("what if: server.")  # the bottleneck's own change
    sentences = [p["sentence"] for p in whatif["predictions"]]
    assert quote.removeprefix("what if: ") in sentences, (quote, sentences)
    assert whatif["check"].startswith("The pipeline's model reproduces this run")


def test_a_stage_bound_by_its_interpreter_lock_is_not_told_to_add_threads(tmp_path: Path) -> None:
    """A pure-Python thread stage limiting a pipeline: the what-if predicts a second thread
    gains nothing (they share the interpreter lock), so the run's end says that, and what
    would help, in place of "more parallelism"; the report says the same."""
    apps = ROOT / "benchmarks" / "_whatif_apps.py"
    sys.path.insert(0, str(apps.parent))
    try:
        from _whatif_apps import spin_turns
    finally:
        sys.path.pop(0)
    proc = _cli("run", str(apps), "--out", "gil.duckdb", "--quiet", "--report", "gil.html",
                "--", "--shape", "gil", "--items", "800", "--turns", str(int(spin_turns(1.0))),
                cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stdout[proc.stdout.index("findings") :]
    assert "parse0 is rate-limiting" in said, said
    doc = json.loads(_cli("show", "--json", "gil.duckdb", cwd=tmp_path).stdout)
    if doc["whatif"]["why_not"]:  # the model refused itself (it may, now and then)
        assert "more parallelism" in said and "more threads will not help" not in said
        return
    (row,) = [p for p in doc["whatif"]["predictions"] if p["changes"] == ["parse0.replicas=2"]]
    assert abs(row["gain"]) < 0.1 and "interpreter lock" in row["predicted"]["limit"]
    assert "more threads will not help parse0" in said and "processes of its own" in said
    assert "more parallelism" not in said
    page = (tmp_path / "gil.html").read_text()
    assert "more threads will not help parse0" in page and "more parallelism" not in page
