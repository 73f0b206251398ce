"""``streamscope hw`` from the command line: the cores listed, a configured core's Verilog
written, bad input refused with what and where."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


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
        (
            ("verilog", "nope"),
            "no probe core 'nope'; the cores are: central, channel, distributed, profile, timestamp, "
            "trigger",
        ),
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


def test_a_bank_s_verilog_is_the_same_from_process_to_process(tmp_path: Path) -> None:
    """The trigger's three inputs the design drives stay ports of its bank, in one order
    whatever a process's hashing (a build cache keyed by the text missed on every run)."""
    import os

    texts = []
    for seed in ("1", "2", "3"):
        out = tmp_path / f"bank{seed}.v"
        done = subprocess.run(
            [sys.executable, "-m", "streamscope", "hw", "verilog", "trigger", "--bank", "-o",
             str(out)], capture_output=True, text=True, timeout=120, check=False,
            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        texts.append(out.read_text())
    assert texts[0] == texts[1] == texts[2]


def test_a_core_s_cost_grows_with_its_trigger_and_is_placed_for_its_frequency() -> None:
    """Yosys and nextpnr on two configurations of the trigger probe: a wider, deeper trigger
    takes more LUTs and runs slower (DeVille, Troxel & George's (2005) trends); the bank adds its registers."""
    import json

    runs = {}
    for params in (("width=4", "max_depth=1"), ("width=16", "max_depth=3")):
        args = [a for p in params for a in ("-p", p)]
        done = _cli("cost", "trigger", *args, "--json")
        assert done.returncode == 0, done.stderr
        runs[params[0]] = json.loads(done.stdout)
    small, big = runs["width=4"], runs["width=16"]
    assert 0 < small["core"]["luts"] < big["core"]["luts"]
    assert small["banked"]["ffs"] > small["core"]["ffs"]  # the configuration registers
    assert big["fmax_mhz"] < small["fmax_mhz"]
    table = _cli("cost", "profile", "--no-pnr")
    assert table.returncode == 0 and "behind bank" in table.stdout and "--no-pnr" in table.stdout


def test_a_missing_synthesiser_is_said_not_a_traceback(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PATH": str(tmp_path)}  # no yosys here
    done = subprocess.run([sys.executable, "-m", "streamscope", "hw", "cost", "trigger"],
                          capture_output=True, text=True, timeout=120, check=False, env=env,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "yosys is not installed" in done.stderr and "Traceback" not in done.stderr


def test_a_tool_that_runs_too_long_is_given_up_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamscope.hw import cost

    monkeypatch.setattr(cost, "TOOL_TIMEOUT_S", 0.2)
    with pytest.raises(cost.SynthesisError, match=r"nextpnr on a design was given up after 0.2 s"):
        cost._run(["sleep", "5"], "nextpnr on a design", tmp_path)


def test_the_fpga_link_example_reads_a_simulated_board() -> None:
    """``examples/fpga_link.py``: a host reads a storage core and a timestamp core over the
    simulated link, as the README's "bring your own FPGA" says a board is read."""
    example = Path(__file__).resolve().parents[2] / "examples" / "fpga_link.py"
    done = subprocess.run(
        [sys.executable, str(example), "--cycles", "120"], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    probes = re.findall(r"probe (\d): (\d+) samples read .* written (\d+), contention drops (\d+)",
                        done.stdout)  # fmt: skip
    assert [p[0] for p in probes] == ["0", "1", "2", "3"]
    assert all(read == written for _, read, written, _ in probes)
    assert sum(int(p[1]) for p in probes) > 0
    first, second = map(int, re.findall(r"timestamp core: (\d+), then (\d+)", done.stdout)[0])
    assert 120 < first < second
