"""One install: what every command imports is in the package's own dependencies, not an extra."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_report_and_export_need_nothing_beyond_a_plain_install() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = _names(project["dependencies"])
    # What `streamscope report` and `streamscope export` import (lazily, when they run).
    assert {"plotly", "otf2", "perfetto", "protobuf", "duckdb", "numpy"} <= deps
    extras = project["optional-dependencies"]
    assert extras.get("report", []) == [] and extras.get("export", []) == []
    for src, imported in (
        ("report/html.py", "from plotly"), ("export/otf2_writer.py", "import otf2"),
        ("export/perfetto.py", "from perfetto"),
    ):  # fmt: skip
        assert imported in (ROOT / "src" / "streamscope" / src).read_text()
