"""``streamscope hw`` from the command line: the cores listed, a configured core's Verilog
written, bad input refused with what and where."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamscope", "hw", *args], capture_output=True,
                          text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_configured_core_s_verilog_has_its_ports_at_its_widths(tmp_path: Path) -> None:
    out = tmp_path / "trigger.v"
    done = _cli("verilog", "trigger", "-p", "width=12", "-p", "max_depth=2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert re.search(r"^module ss_trigger\(", text, re.M)
    ports = re.findall(r"^\s*(?:input|output)\s+(?:\[(\d+):0\]\s+)?(\w+);", text, re.M)
    widths = {name: top for top, name in ports}
    assert widths["value"] == "11" and widths["held"] == "11"  # 12 bits
    assert widths["strobe"] == "" and widths["fired"] == ""  # one bit
    assert {"match__0", "match__1", "mask__1", "op__1"} <= set(widths)
    assert "match__2" not in widths  # two levels built
    listed = _cli("list")
    assert listed.returncode == 0 and "trigger:" in listed.stdout and "width=8" in listed.stdout


def test_bad_cores_and_parameters_are_refused_with_what_is_allowed() -> None:
    for args, said in (
        (("verilog", "nope"), "no probe core 'nope'; the cores are: profile, trigger"),
        (("verilog", "trigger", "-p", "depth=3"), "'depth=3' is not NAME=VALUE"),
        (("verilog", "trigger", "-p", "width=x"), "width must be an integer, not 'x'"),
        (("verilog", "trigger", "-p", "width=0"), "widths and depth are at least 1"),
    ):
        done = _cli(*args)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
