"""The report of a program that keeps 300 queues, each used once between two threads, under
the real ``streamscope run`` and ``streamscope report``: the queues are one family on the page
(one series, one edge, one finding with the rest named), the page is no larger than a few
queues' page, it draws in a real browser, and the family's histogram holds every member's
weight in the run file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from test_report import _check_rendered, _figures

import streamscope as ss
from streamscope.report.data import query_series
from streamscope.report.families import grouped
from watched import cli

APP = Path(__file__).parent / "apps" / "kept_queues.py"
KEPT = 300
FEW = 3


def _run_and_report(tmp: Path, n: int) -> tuple[Path, Path]:
    """``streamscope run kept_queues.py -- N`` and ``streamscope report`` of it, real
    subprocesses; without sampled stacks, whose flame graphs are as large as what was sampled
    (the stacks a busy machine's preemptions catch), however many queues there are: the
    300-queue page's own bytes were 2.04 times the 3-queue page's once, the flame graph
    alone on it."""
    out, page = tmp / f"kept{n}.duckdb", tmp / f"kept{n}.html"
    run = subprocess.run(
        [*cli(), "run", str(APP), "-o", str(out), "--quiet", "--no-stacks", "--", str(n)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == f"{n}\n"
    report = subprocess.run(
        [*cli(), "report", str(out), "-o", str(page)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    return out, page


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("families")
    return {n: _run_and_report(tmp, n) for n in (FEW, KEPT)}


def _traces(html: str) -> list[str]:
    return [str(t.get("name", "")) for f in _figures(html).values() for t in f["data"]]  # type: ignore[attr-defined]


def test_300_kept_queues_are_one_family_on_a_page_the_size_of_a_few(
    pages: dict[int, tuple[Path, Path]], tmp_path: Path
) -> None:
    run_file, page = pages[KEPT]
    html = page.read_text()
    with ss.load(run_file) as run:
        assert len(run.topology.channels) == KEPT
    # Named with its count: in the figures' legends, the query's targets, the graph, the table.
    names = _traces(html)
    assert "maker -&gt; taker (300 channels, each on average)" in names
    assert "maker -&gt; taker (300 channels, max: the largest)" in names
    assert "targets: maker -&gt; taker (a family of 300)" in html
    assert "<td>maker -&gt; taker (a family of 300)</td>" in html
    # No trace of its own for any member, nor a figure of one.
    assert not [n for n in names if re.search(r"#\d", n)], names
    assert not [t for t in re.findall(r'data-name="([^"]*)"', html) if re.search(r"#\d", t)]
    small = page.with_name(f"kept{FEW}.html").read_text()
    assert len(names) <= len(_traces(small))  # one per family: no more than 3 queues have
    # Bounded: besides plotly.js (inlined once in both), no more than twice a 3-queue page's
    # own bytes (one series per queue made it 50 times that).
    js = len(re.search(r"<script>(/\*\*\s*\n\* plotly\.js.*?)</script>", html, re.S)[1])  # type: ignore[index]
    assert len(html) - js < 2 * (len(small) - js), (len(html), len(small), js)
    # The findings alike on its members are one, the rest named by number.
    more = re.findall(r"and (\d+) more like it on the family <b>maker -&gt; taker</b>", html)
    assert more and all(int(m) < KEPT for m in more)
    start = html.index('<section id="findings"')
    findings = html[start : html.index("<section ", start + 1)]  # up to the next section
    assert len(findings) < 20_000, len(findings)
    # It draws in a real browser: two boxes, one edge for the 300 queues.
    root = _check_rendered(page, tmp_path, stages=2, channels=1)
    (edge,) = root.find("g", "ss-channel")
    assert edge.attrs["data-members"] == str(KEPT)
    assert edge.attrs["data-channel"] == "maker -> taker"


def test_the_familys_histogram_holds_every_members_weight(
    pages: dict[int, tuple[Path, Path]],
) -> None:
    run_file, page = pages[KEPT]
    with ss.load(run_file) as run:
        (q,) = [q for q in run.queries if q.metric == "occupancy"]
        _, rows = run.sql(
            f"SELECT bin, sum(weight) FROM histogram WHERE query_id = {q.id} GROUP BY bin "
            "ORDER BY bin"
        )
        series = next(s for s in query_series(run) if s.id == q.id)
    stored = {int(b): float(w) for b, w in rows}
    (fam,) = grouped(series).targets
    assert fam.members == KEPT
    added = [sum(w[i] for w in fam.weights) for i in range(len(fam.edges) - 1)]
    assert added == pytest.approx([stored[i] for i in range(len(added))], rel=1e-9)
    assert sum(fam.under) == pytest.approx(stored.get(-1, 0.0), abs=1e-6)
    assert sum(fam.over) == pytest.approx(stored.get(-2, 0.0), abs=1e-6)
    # ...and the page's bars are those weights' shares.
    figs = _figures(page.read_text())
    (bars,) = [f for f in figs.values() if "histogram over the run" in json.dumps(f["layout"])]
    grand = sum(stored.values())
    shares = bars["data"][0]["y"]  # type: ignore[index]
    assert shares == pytest.approx([stored[i] / grand for i in range(len(added))], rel=1e-5)


def test_show_tells_the_family_in_a_few_screens(pages: dict[int, tuple[Path, Path]]) -> None:
    """``streamscope show`` of the 300 kept queues: one row per query for the family, a few
    screens in all, not a row per queue and frame."""
    run_file, _ = pages[KEPT]
    shown = subprocess.run(
        [*cli(), "show", str(run_file)], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    text = re.sub(r"[\s│]+", " ", shown.stdout + shown.stderr)
    assert f"maker -> taker (a family of {KEPT})" in text
    assert len((shown.stdout + shown.stderr).splitlines()) < 200
