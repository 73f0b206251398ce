"""``streamscope report``: one self-contained HTML page, opened in a real headless browser.

The browser (Debian's ``chromium``) runs with every fetch sent to a dead proxy; the page itself
forbids fetches (Content-Security-Policy) and counts script errors into ``<body data-errors>``.
The checks read the DOM after the scripts ran: the SVG graph's stage boxes and every plot div's
plotly elements (``.plot-container``, ``.main-svg``) must be there.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

import streamscope as ss
from oracles import example
from streamscope.report import ReportSummary, write_report

QUERIES = [
    "state(work): duty every 100ms",
    "occupancy(src -> work): mean, max, histogram every 100ms",
    "throughput(work -> sink): mean every 100ms",
    "latency(src -> work): box every 100ms",
]
HOSTILE_STAGE = "<img src=x onerror=alert(1)>"
HOSTILE_NAME = "x</title><script>alert('pwn')</script>&"
INSTALL = (
    "the report tests need a headless browser: install Debian's chromium with "
    "`apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium`"
)


def _work(x: int) -> int:
    time.sleep(0.001)
    return x


def _simple(path: Path, name: str = "x", sink: str = "sink", delay: float = 0.001) -> Path:
    p = ss.Pipeline(name)
    p.add("src", range(300))
    p.add("work", lambda x: (time.sleep(delay), x)[1])
    p.add(sink, lambda x: None)
    p.chain("src", "work", sink, capacity=4)
    queries = QUERIES if sink == "sink" else QUERIES[:2] + QUERIES[3:]
    ss.run(p, queries, ss.RunOptions(out=path, mode="inline"))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("report")
    mod = example("vq_mm1_sw2hw")
    ss.run(
        mod.pipeline(["--items", "600"]),
        mod.QUERIES,
        ss.RunOptions(out=d / "vq.duckdb", mode="inline", ground_truth=True),
    )
    return {
        "a": _simple(d / "a.duckdb"),
        "b": _simple(d / "b.duckdb", HOSTILE_NAME, HOSTILE_STAGE, 0.0005),
        "vq": d / "vq.duckdb",
    }


# --- a headless browser ------------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(INSTALL)


def _browser_args(profile: Path) -> list[str]:
    return [
        _chromium(),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--proxy-server=127.0.0.1:9",  # any fetch goes to a closed port: no network
        "--proxy-bypass-list=<-loopback>",
        "--virtual-time-budget=15000",
        "--enable-logging=stderr",
        "--v=0",
    ]


def _dump_dom(page: Path, tmp: Path) -> tuple[str, str]:
    proc = subprocess.run(
        [*_browser_args(tmp / "profile-dom"), "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _screenshot(page: Path, tmp: Path) -> Path:
    png = tmp / f"{page.stem}.png"
    proc = subprocess.run(
        [
            *_browser_args(tmp / "profile-shot"),
            "--hide-scrollbars",
            "--window-size=1400,3000",
            f"--screenshot={png}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return png


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def walk(self) -> list[Node]:
        out = [self]
        for c in self.children:
            out += c.walk()
        return out

    def find(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            n
            for n in self.walk()
            if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
        ]


VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr"}


class _Tree(HTMLParser):
    """A DOM tree from the browser's serialised DOM (well-formed: it wrote it)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return


def _tree(dom: str) -> Node:
    t = _Tree()
    t.feed(dom)
    return t.root


def _check_rendered(page: Path, tmp: Path, stages: int, channels: int) -> Node:
    """Open the page offline; everything drew and nothing failed."""
    dom, log = _dump_dom(page, tmp)
    root = _tree(dom)
    body = root.find("body")[0]
    assert body.attrs.get("data-ready") == "1", "the page's scripts did not finish"
    errors = root.find(cls="error")
    assert body.attrs.get("data-errors") == "0", [e.children for e in errors]
    assert "Uncaught" not in log, log[-3000:]
    console_errors = [ln for ln in log.splitlines() if ":CONSOLE" in ln and "error" in ln.lower()]
    assert not console_errors, console_errors
    # The pipeline graph: one drawn box per stage, one label per channel.
    svg = root.find("svg", "ss-graph")
    assert len(svg) == 1
    boxes = svg[0].find("g", "ss-stage")
    assert len(boxes) == stages
    assert all(b.find("rect", "ss-stage-box") for b in boxes)
    assert len(svg[0].find("g", "ss-channel")) == channels
    assert len(svg[0].find("path", "ss-channel-line")) == channels
    # Every plot drew: plotly's containers and SVG layers inside each plot div.
    plots = root.find("div", "ss-plot")
    assert plots, "no plot on the page"
    assert body.attrs.get("data-plots") == str(len(plots))
    assert body.attrs.get("data-rendered") == str(len(plots))
    for div in plots:
        assert div.find(cls="plot-container"), div.attrs
        assert div.find(cls="main-svg"), div.attrs
    return root


def _figures(html: str) -> dict[str, dict[str, object]]:
    m = re.search(r'<script type="application/json" id="ss-figures">(.*?)</script>', html, re.S)
    assert m is not None
    figs: dict[str, dict[str, object]] = json.loads(m.group(1))
    return figs


def _no_external_fetch(html: str) -> None:
    tags = re.findall(r"<(?:script|link|img|iframe|source|object)\b[^>]*>", html, re.I)
    assert not [t for t in tags if re.search(r"\b(?:src|href)\s*=", t, re.I)], tags[:5]
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "@import" not in html and "fonts.googleapis" not in html


# --- tests -------------------------------------------------------------------------------------


def test_report_of_a_run_renders_offline_with_every_section(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "a.html"
    summary = write_report(runs["a"], out)
    assert isinstance(summary, ReportSummary)
    assert summary.path == out and summary.bytes == out.stat().st_size
    assert 1e6 < summary.bytes < 10e6  # plotly.js inlined once, well under 10 MB
    assert summary.sections[0] == "findings"
    for s in ("pipeline", "queries", "histograms", "latency", "virtual-queues", "clocks"):
        assert s in summary.sections
    assert "compare" not in summary.sections
    html = out.read_text()
    _no_external_fetch(html)
    assert html.count("plotly.js v") == 1  # the bundle's banner: inlined once
    assert html.index('id="findings"') < html.index('id="pipeline"')
    figs = _figures(html)
    # Every figure is a valid plotly figure (plotly validates every property name).
    import plotly.graph_objects as go

    for spec in figs.values():
        go.Figure(spec)
    names = re.findall(r'class="ss-plot"[^>]*data-name="([^"]*)"', html)
    assert any("box" in n for n in names)  # latency box-whisker (Lancaster & Chamberlain 2010)
    assert any("histogram" in n for n in names)  # occupancy histograms
    assert any("duty" in n for n in names)
    box = next(f for f in figs.values() if f["data"][0]["type"] == "box")  # type: ignore[index]
    with ss.load(runs["a"]) as run:
        frames = [r for r in run.results(3) if r.point("quantiles").values[2] is not None]  # type: ignore[union-attr]
    assert len(box["data"][0]["median"]) == len(frames) > 0  # type: ignore[index]  # a box per frame
    root = _check_rendered(out, tmp_path, stages=3, channels=2)
    # The bottleneck stage's bar shows it busy; the channel into it shows its fill.
    work = next(g for g in root.find("g", "ss-stage") if g.attrs["data-stage"] == "work")
    assert work.find("rect", "ss-seg-busy")
    into = next(g for g in root.find("g", "ss-channel") if g.attrs["data-channel"] == "src -> work")
    assert into.find("rect", "ss-fill")
    finding = root.find("div", "finding")
    assert finding and finding[0].attrs.get("data-kind")
    png = _screenshot(out, tmp_path)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_virtual_queue_and_clock_sections(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "vq.html"
    summary = write_report(runs["vq"], out)
    html = out.read_text()
    with ss.load(runs["vq"]) as run:
        vq = run.virtual_queues()[0]
        verdict = vq["verdict"]
        n_frames = len(vq["frames_detail"])
    assert f'data-verdict="{verdict}"' in html
    # Which arrivals model simulated the frames, and the i.i.d. model's verdict, are said.
    used = ", ".join(f"{k} {n}" for k, n in vq["arrivals_used"].items())
    assert used and f"<td>{used}</td>" in html
    assert "arrivals model (frames)" in html and "i.i.d. gaps" in html
    names = re.findall(r'class="ss-plot"[^>]*data-name="([^"]*)"', html)
    assert "vq source -&gt; server self-check" in names
    assert "vq source -&gt; server levels" in names
    assert "clock accel fits" in names and "clock accel exchanges" in names
    figs = _figures(html)
    levels = next(f for f in figs.values() if "level distributions" in str(f["layout"]))
    series = {t["name"] for t in levels["data"]}  # type: ignore[attr-defined]
    assert {"tail buffer: measured", "tail buffer: predicted", "head buffer: measured"} <= series
    assert "whole queue: truth" in series  # ground truth was recorded
    if n_frames > 1:  # a menu to pick a frame (frames are 1 s: the run has one or two)
        assert levels["layout"]["updatemenus"]  # type: ignore[index]
    assert "rate error (ppm)" in html and "bound width" in html
    root = _check_rendered(out, tmp_path, stages=3, channels=2)
    link = next(g for g in root.find("g", "ss-channel") if g.attrs["data-virtual"] == "1")
    assert link.attrs["data-channel"] == "source -> server"
    assert summary.bytes < 10e6


def test_cli_report_with_compare_escapes_names(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    proc = subprocess.run(
        [sys.executable, "-m", "streamscope", "report", str(runs["b"]), "-o", str(out),
         "--compare", str(runs["a"])],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert str(out) in proc.stdout and "compare" in proc.stdout
    html = out.read_text()
    assert 'id="compare"' in html and 'class="ss-compare-summary"' in html
    assert html.index('id="findings"') < html.index('id="compare"')
    # The comparison leads with whether the other run is faster, in one plain sentence.
    lead = html.index('class="ss-compare-headline"')
    assert html.index('id="compare"') < lead < html.index('class="ss-compare-summary"')
    sentence = html[lead : html.index("</p>", lead)]
    assert re.search(r"faster|slower|as fast|[Cc]annot say", sentence), sentence
    # Names from the run never reach the page as markup.
    assert HOSTILE_STAGE not in html and HOSTILE_NAME not in html
    assert "alert(1)" in html  # ...but they are shown, escaped
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    _no_external_fetch(html)
    root = _check_rendered(out, tmp_path, stages=3, channels=2)
    stages = {g.attrs["data-stage"] for g in root.find("g", "ss-stage")}
    assert HOSTILE_STAGE in stages  # the attribute decodes back to the real name
    assert root.find("table", "ss-compare")


def test_cli_without_compare_has_no_compare_section(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "plain.html"
    proc = subprocess.run(
        [sys.executable, "-m", "streamscope", "report", str(runs["a"]), "-o", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert 'id="compare"' not in out.read_text()


@pytest.mark.parametrize("kind", ["missing", "not-a-run"])
def test_cli_bad_run_file_fails_clearly(kind: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.duckdb"
    if kind == "not-a-run":
        bad.write_text("this is not a run file\n")
    out = tmp_path / "bad.html"
    proc = subprocess.run(
        [sys.executable, "-m", "streamscope", "report", str(bad), "-o", str(out)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "streamscope: error:" in proc.stderr and str(bad) in proc.stderr
    assert ("does not exist" if kind == "missing" else "not a streamscope run") in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_sixteen_walks_fit_the_graph_at_1400px(tmp_path: Path) -> None:
    """The flagship with 16 parallel walks, its report drawn by Chromium in a 1400 px window:
    the graph is no wider than its place, every stage box lies inside the drawn graph and no
    two overlap (the browser's own geometry); a screenshot is kept beside the test's files."""
    out = tmp_path / "l16.duckdb"
    mod = example("laplace")
    ss.run(
        mod.pipeline(["--walks", "16", "--blocks", "2000"]),
        mod.queries("1s"),
        ss.RunOptions(out=out, mode="inline"),
    )
    page = tmp_path / "l16.html"
    write_report(out, page)
    proc = subprocess.run(
        [*_browser_args(tmp_path / "profile-16"), "--window-size=1400,2000", "--dump-dom",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (svg,) = _tree(proc.stdout).find("svg", "ss-graph")
    wrap_w, svg_w, svg_h = (float(v) for v in svg.attrs["data-shown"].split(","))
    assert svg_w <= wrap_w + 0.5, (svg_w, wrap_w)  # no part of it off to the side
    boxes = [tuple(float(v) for v in b.split(",")) for b in svg.attrs["data-boxes"].split(";")]
    assert len(boxes) == 16 + 4  # prng, split, 16 walks, avg, print
    for x, y, w, h in boxes:
        assert x >= 0 and y >= 0 and x + w <= svg_w + 0.5 and y + h <= svg_h + 0.5
        assert w >= 100  # legible: at least half its drawn size
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1 :]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y, "boxes overlap"
    shot = _screenshot(page, tmp_path)
    assert shot.stat().st_size > 10_000


def test_every_section_is_of_one_shape_and_a_new_one_is_one_entry(runs: dict[str, Path]) -> None:
    """The page's sections are the default list's, in order: each renders its own anchor and
    is named by its title in the navigation bar; a section added to the list is on the page."""
    from streamscope.report.html import render
    from streamscope.report.sections import DEFAULT_SECTIONS, Context

    class Extra:
        id = "extra"
        title = "Extra"

        def render(self, ctx: Context) -> str:
            return f'<section id="extra"><h2>{len(ctx.run.topology.stages)} stages</h2></section>'

    with ss.load(runs["a"]) as run:
        html, ids = render(run, sections=(*DEFAULT_SECTIONS, Extra()))
    assert ids[-1] == "extra" and ids[:4] == ["findings", "whatif", "stacks", "pipeline"]
    # The what-if section: the model's self-check, then the obvious changes (or why it
    # predicts nothing); a bottleneck finding quotes its prediction.
    section = html[html.index('<section id="whatif"') :].split("</section>", 1)[0]
    assert "reproduces this run" in section or "does not reproduce" in section
    if "reproduces this run" in section:
        assert 'class="ss-whatif"' in section and ".speed=2x" in section
    by_id = {s.id: s for s in DEFAULT_SECTIONS}
    for anchor in ids:
        assert f'<section id="{anchor}"' in html
        title = "Extra" if anchor == "extra" else by_id[anchor].title
        assert f'<a href="#{anchor}">{title}</a>' in html
    assert "compare" not in ids and "profiles" not in ids  # nothing to show: left off
