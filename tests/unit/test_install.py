"""One install: what every command imports is in the package's own dependencies, not an extra,
but for hosts (Ray) and the probe cores (Amaranth), each an extra that ``make`` installs."""

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


def test_hosts_and_the_probe_cores_are_the_extras_their_errors_name() -> None:
    """Each module ``core/extras.py`` asks for is in the extra its error names, only there, and
    ``make`` installs every extra (its tests exercise both)."""
    from streamscope.core.extras import EXTRAS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert not set(EXTRAS) & _names(project["dependencies"])
    for module, extra in EXTRAS.items():
        assert _names(extras[extra.name]) == {module}, extra
    installed = re.search(r"pip install .*-e '\.\[([\w,]+)\]'", (ROOT / "Makefile").read_text())
    assert installed is not None
    assert {"dev", *(e.name for e in EXTRAS.values())} <= set(installed.group(1).split(","))
