"""The README's quick start works when copied: its app file and its commands, as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(lang: str) -> list[str]:
    text = README.read_text()
    quick = text[text.index("## Quick start") : text.index("## Describing an application")]
    return re.findall(rf"```{lang}\n(.*?)```", quick, re.S)


def test_readme_shows_exactly_the_two_setup_commands() -> None:
    text = README.read_text()
    setup = text[text.index("## Set up") : text.index("## Quick start")]
    commands = [
        line.split("#")[0].strip()
        for line in re.findall(r"```sh\n(.*?)```", setup, re.S)[0].splitlines()
    ]
    assert [c for c in commands if c] == ["make run", "make test"]


@pytest.mark.slow
def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    (app,) = blocks("python")
    (tmp_path / "app.py").write_text(app)
    (commands,) = blocks("sh")[-1:]
    bindir = str(Path(sys.executable).parent) + "/"
    script = commands.replace(".venv/bin/", bindir)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "completed" in proc.stdout
    assert "mean_items" in proc.stdout  # the sql command's column
    # What the README says the run shows: the channel into server full, server busy.
    assert re.search(r"mean=1[5-6]\.\d+\s+max=16", proc.stdout), proc.stdout[-3000:]
    assert re.search(r"busy=(9\d|100)%", proc.stdout), proc.stdout[-3000:]


def test_the_five_likely_mistakes_print_what_the_readme_shows(tmp_path: Path) -> None:
    """Each ``$ streamscope ...`` line of "When something is wrong", run as written in a folder
    with the quick start's app.py (and no ap.py): the tool's output is the
    README's, character for character, and the exit status is 2."""
    (app,) = blocks("python")
    (tmp_path / "app.py").write_text(app)
    text = README.read_text()
    section = text[text.index("### When something is wrong") : text.index("## Describing")]
    (console,) = re.findall(r"```console\n(.*?)```", section, re.S)
    cases = re.findall(r"^\$ (streamscope .*)\n((?:(?!\$ ).*\n)*)", console, re.M)
    assert len(cases) == 5
    bindir = str(Path(sys.executable).parent) + "/"
    for command, expected in cases:
        proc = subprocess.run(
            ["bash", "-c", bindir + command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert proc.returncode == 2, (command, proc.stderr)
        assert proc.stdout + proc.stderr == expected, command


def test_every_metric_has_an_example_that_parses() -> None:
    from streamscope.query import METRICS, parse_query

    text = README.read_text()
    block = text.split("Examples, one per metric:", 1)[1].split("```", 2)[1]
    lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines()]
    queries = [parse_query(ln) for ln in lines if ln]
    assert {q.metric for q in queries} == set(METRICS)
