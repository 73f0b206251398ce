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


def test_a_core_s_register_map_and_its_bank_s_verilog(tmp_path: Path) -> None:
    done = _cli("map", "trigger", "-p", "max_depth=2", "-p", "count_width=40")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[-1]: line.split()[:4] for line in done.stdout.splitlines()[1:-2]}
    assert rows["count"] == ["0x000a", "2", "40", "ro"]  # two words, low first
    assert rows["mask[1]"] == ["0x0001", "1", "8", "rw"]
    assert "(magic: 0x53535242)" in done.stdout and "snap, strobe, value" in done.stdout
    out = tmp_path / "bank.v"
    done = _cli("verilog", "profile", "--bank", "-o", str(out))
    assert done.returncode == 0, done.stderr
    header = re.search(r"^module ss_profile_bank\(([^)]*)\);", out.read_text(), re.M)
    assert header is not None
    ports = {p.strip() for p in header.group(1).split(",")}
    assert ports == {"addr", "r_en", "r_data", "w_en", "w_data", "state", "clk", "rst"}
    assert "frame_cycles" not in ports  # a register behind the bus, not a port
