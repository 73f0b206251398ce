"""The README and the docs work when copied: their files and their commands, as written.

Which commands run: every fenced ``sh``/``bash`` block of README.md and docs/*.md whose every
command is ``streamscope`` itself (``.venv/bin/streamscope``, as ``make run`` installs it; a block
with anything else in it, as the set-up's ``make``, is not run), and every ``$ streamscope ...``
line of a ``console`` block, whose output must be the page's, character for character. A page's
commands run in one folder of their own, in the page's order (so later commands reuse the run
files of earlier ones), holding the files the page says to save ("Save this as `app.py`:" and
the ``python`` block after it) and the repository's ``examples/``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
BINDIR = str(Path(sys.executable).parent) + "/"

#: A command the tests can run: streamscope itself, installed or on the path.
STREAMSCOPE = re.compile(r"^(?:\.venv/bin/)?streamscope\b")
#: Commands that need an optional extra, by what they run: without it they are skipped.
NEEDS = {r"examples/hosts\.py": "ray", r"\bstreamscope hw\b": "amaranth"}
#: Commands run by another test, which checks what they show in full, by what they run: a page's
#: run leaves them out (the hosts example starts a cluster of its own: ~20 s more for the same
#: run).
RUN_ELSEWHERE = {r"examples/hosts\.py": ROOT / "tests" / "integration" / "test_hosts_cluster.py"}


def fences(text: str) -> list[tuple[str, str]]:
    """Every fenced block of a page: (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def blocks(lang: str, page: Path = README, start: str = "", end: str = "") -> list[str]:
    """The ``lang`` blocks of ``page``, between the headings ``start`` and ``end`` if given."""
    text = page.read_text()
    if start:
        text = text[text.index(start) : text.index(end) if end else None]
    return [body for got, body in fences(text) if got == lang]


def commands(block: str) -> list[str]:
    return [
        ln.strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]


def runnable(lang: str, block: str) -> bool:
    lines = commands(block)
    return lang in ("sh", "bash") and bool(lines) and all(STREAMSCOPE.match(ln) for ln in lines)


def saved_files(page: Path) -> dict[str, str]:
    """The files a page says to save: "Save this as `NAME`..." then a python block."""
    text = page.read_text()
    return dict(
        re.findall(r"Save this as `([^`]+)`[^\n]*\n\n```python\n(.*?)^```", text, re.S | re.M)
    )


def missing_extra(script: str) -> str | None:
    for pattern, module in NEEDS.items():
        if re.search(pattern, script) and importlib.util.find_spec(module) is None:
            return module
    return None


def folder_for(page: Path, tmp_path: Path) -> Path:
    for name, body in saved_files(page).items():
        (tmp_path / name).write_text(body)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


def ran(page: Path, tmp: str) -> subprocess.CompletedProcess[str]:
    """Every runnable shell block of ``page``, in order, in the folder ``tmp``: one script."""
    script = "\n".join(
        body
        for lang, body in fences(page.read_text())
        if runnable(lang, body) and not any(re.search(p, body) for p in RUN_ELSEWHERE)
    )
    script = re.sub(r"(?m)^(?:\.venv/bin/)?streamscope\b", BINDIR + "streamscope", script)
    # a what-if whose model does not reproduce the run says so and exits 3, as the guide says
    script = re.sub(r"(?m)^(.*streamscope whatif .*)$", r"{ \1; } || [ $? -eq 3 ]", script)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_readme_shows_exactly_the_two_setup_commands() -> None:
    text = README.read_text()
    setup = text[text.index("## Set up") : text.index("## Quick start")]
    commands = [
        line.split("#")[0].strip()
        for line in re.findall(r"```sh\n(.*?)```", setup, re.S)[0].splitlines()
    ]
    assert [c for c in commands if c] == ["make run", "make test"]
    # Nothing else in the README is a set-up command to type: pip is said in prose.
    others = [b for lang, b in fences(text) if lang in ("sh", "bash") and "make " not in b]
    assert all(runnable("sh", b) for b in others), others


def test_every_page_has_something_to_run_or_none_is_expected() -> None:
    """The pages whose commands are run: a page that loses its runnable blocks is said here."""
    has = {p.name for p in PAGES if any(runnable(lang, b) for lang, b in fences(p.read_text()))}
    assert {"README.md", "guide.md", "queries.md", "devices-and-hosts.md", "fpga-cores.md",
            "services.md"} <= has  # fmt: skip


@pytest.mark.slow
def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The unmodified program of the quick start, run, shown and reported as the README says."""
    assert set(saved_files(README)) == {"prog.py"}
    proc = ran(README, str(folder_for(README, tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "completed" in out and "total 1999000" in proc.stdout
    # What the README says the run shows: the stages named after their functions, the channel
    # into server full, server busy, and the report's first finding.
    assert re.search(r"source -> server.*mean=1[4-6](\.\d+)?\s+max=16", out), out[-3000:]
    assert re.search(r"busy=(9\d|100)%", out), out[-3000:]
    assert "stage server is rate-limiting" in (tmp_path / "prog.html").read_text()


@pytest.mark.slow
def test_guide_runs_as_written(tmp_path: Path) -> None:
    """The guide's pipeline: its run, show and sql, a run with queries, report, compare, export."""
    page = DOCS / "guide.md"
    assert set(saved_files(page)) == {"app.py"}
    proc = ran(page, str(folder_for(page, tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "completed" in proc.stdout
    assert "mean_items" in proc.stdout  # the sql command's column
    # What the guide says the run shows: the channel into server full, server busy.
    assert re.search(r"mean=1[5-6]\.\d+\s+max=16", proc.stdout), proc.stdout[-3000:]
    assert re.search(r"busy=(9\d|100)%", proc.stdout), proc.stdout[-3000:]
    assert "stage server is rate-limiting" in (tmp_path / "quick.html").read_text()
    assert re.search(r"Run B \(quickstart\) is .* run A \(quickstart\)", proc.stdout)
    # the what-if predicts, or says in one line why its model does not reproduce the run
    said = " ".join(proc.stdout.split())
    assert "what if server.replicas=2" in said, proc.stdout[-3000:]
    assert re.search(r"self-check consistent|The model does not reproduce this run, so it "
                     r"predicts nothing: \S", said), proc.stdout[-3000:]  # fmt: skip
    assert (tmp_path / "quick.perfetto-trace").stat().st_size > 0


def test_the_guides_python_runs_as_written(tmp_path: Path) -> None:
    """The guide's "From Python": its app.py's pipeline run and read back from a script."""
    page = DOCS / "guide.md"
    (script,) = blocks("python", page, "### From Python", "## Reports")
    (folder_for(page, tmp_path) / "from_python.py").write_text(script)
    proc = subprocess.run([sys.executable, "from_python.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames = [ln.split() for ln in proc.stdout.splitlines() if re.fullmatch(r"\d+ [\d.]+", ln)]
    assert frames and all(0 <= float(v) <= 16 for _, v in frames), proc.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["queries.md", "devices-and-hosts.md", "fpga-cores.md", "services.md"], ids=lambda n: n
)
def test_docs_commands_run_as_written(name: str, tmp_path: Path) -> None:
    page = DOCS / name
    script = "\n".join(b for lang, b in fences(page.read_text()) if runnable(lang, b))
    if module := missing_extra(script):
        pytest.skip(f"{name}'s commands need {module} (an optional extra)")
    proc = ran(page, str(folder_for(page, tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = {
        "queries.md": ['"dropped":', '"recorded":'],
        "devices-and-hosts.md": ["W1 to", "truth", "completed"],
        "fpga-cores.md": ["trigger:", "module ss_trigger", "0x0fff"],
        "services.md": ["words stored", "metrics: http://127.0.0.1:", "receive -> parse"],
    }[name]
    out = proc.stdout + proc.stderr
    assert all(s in out for s in said), out[-3000:]


def test_the_five_likely_mistakes_print_what_the_guide_shows(tmp_path: Path) -> None:
    """Each ``$ streamscope ...`` line of "When something is wrong", run as written in a folder
    with the guide's app.py (and no ap.py): the tool's output is the guide's, character for
    character, and the exit status is 2."""
    page = DOCS / "guide.md"
    (console,) = blocks("console", page, "### When something is wrong", "## Describing")
    assert len(re.findall(r"^\$ streamscope ", console, re.M)) == 5
    folder_for(page, tmp_path)
    assert_console(console, tmp_path)


def test_every_console_block_prints_what_it_shows(tmp_path: Path) -> None:
    """Every ``console`` block of every page, run in a folder with that page's files."""
    for i, page in enumerate(PAGES):
        consoles = blocks("console", page)
        if consoles:
            folder = tmp_path / str(i)
            folder.mkdir()
            folder_for(page, folder)
            for console in consoles:
                assert_console(console, folder)


def assert_console(console: str, folder: Path) -> None:
    cases = re.findall(r"^\$ (streamscope .*)\n((?:(?!\$ ).*\n)*)", console, re.M)
    assert cases
    for command, expected in cases:
        proc = subprocess.run(
            ["bash", "-c", BINDIR + command],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert proc.returncode == (2 if "streamscope: error:" in expected else 0), (
            command,
            proc.stderr,
        )
        assert proc.stdout + proc.stderr == expected, command


def test_every_metric_has_an_example_that_parses() -> None:
    from streamscope.query import METRICS, parse_query

    text = (DOCS / "queries.md").read_text()
    block = text.split("Examples, one per metric:", 1)[1].split("```", 2)[1]
    lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines()]
    queries = [parse_query(ln) for ln in lines if ln]
    assert {q.metric for q in queries} == set(METRICS)


def anchors(page: Path) -> set[str]:
    """The heading anchors of a page, as the renderers make them."""
    out = set()
    for heading in re.findall(
        r"^#+ (.*)$", re.sub(r"(?ms)^```.*?^```", "", page.read_text()), re.M
    ):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        out.add(slug)
    return out


def links(page: Path) -> list[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_the_readme_links_every_docs_page_and_each_exists() -> None:
    linked = {
        (README.parent / target).resolve() for target in links(README) if target.startswith("docs/")
    }
    assert all(p.exists() for p in linked), sorted(str(p) for p in linked if not p.exists())
    assert set(DOCS.glob("*.md")) == {p for p in linked if p.suffix == ".md"}


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for page in [README, *DOCS.glob("*.md")]:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # an address elsewhere, not a file of the project
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_the_cli_page_shows_each_commands_help_as_it_is() -> None:
    """docs/cli.md's option lists are each command's ``--help`` as a terminal of 100 columns
    shows it, character for character."""
    text = (DOCS / "cli.md").read_text()
    shown = re.findall(r"^```text\n(Usage: streamscope.*?)^```", text, re.S | re.M)
    helps = {}
    for block in shown:
        usage = re.match(r"Usage: (streamscope(?: \w+)*)", block)
        assert usage, block[:80]
        helps[usage[1]] = block
    assert len(helps) == 15  # streamscope, its nine commands, hw and its four
    script = "; ".join(f"{BINDIR}{command} --help; echo '<<end>>'" for command in helps)
    proc = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100"},
    )
    got = proc.stdout.split("<<end>>\n")[:-1]
    assert dict(zip(helps, got, strict=True)) == helps


def test_commands_run_elsewhere_are_run_there() -> None:
    """What a page's run leaves out is run by the test named for it, with the same script."""
    shown = "\n".join(p.read_text() for p in PAGES)
    for pattern, test in RUN_ELSEWHERE.items():
        assert re.search(pattern, shown), pattern  # still on a page
        script = re.search(r"examples/(\w+\.py)", pattern.replace("\\", "")).group(1)
        assert f'"{script}"' in test.read_text(), (script, test.name)
