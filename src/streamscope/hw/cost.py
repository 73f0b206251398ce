"""What a probe core costs in logic: synthesised by Yosys for an iCE40 (``synth_ice40``), placed
and routed by nextpnr for its maximum clock frequency.

In: a configured core (``hw.cores``). Out: ``Cost``: the core's own LUTs, carry cells,
flip-flops and block RAMs, and the same behind its register bank (what a design instantiates),
with the bank's maximum frequency after place and route (an HX8K in its CT256 package; the
core's own ports would outnumber the pins). Debian's ``yosys``, ``nextpnr-ice40`` (and
``fpga-icestorm``) do the work; ``make test`` installs them.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamscope.core.errors import StreamscopeError

#: The part nextpnr places on.
DEVICE = ("--hx8k", "--package", "ct256")
_FMAX = re.compile(r"Max frequency for clock '[^']*': ([0-9.]+) MHz")


class SynthesisError(StreamscopeError):
    """A tool is missing, or failed on a core."""


class DoesNotFit(SynthesisError):
    """More logic cells or pins than the part has."""


@dataclass(frozen=True, slots=True)
class Logic:
    """Cells of one synthesised design."""

    luts: int
    carries: int
    ffs: int
    brams: int


@dataclass(frozen=True, slots=True)
class Cost:
    """A core alone (``core``), behind its bank (``banked``), and the bank's ``fmax_mhz`` (None:
    not placed; ``fits`` False: its logic or its pins did not fit the part)."""

    core: Logic
    banked: Logic
    fmax_mhz: float | None
    fits: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SynthesisError(f"{name} is not installed: the cost of a core needs Debian's yosys, "
                             "nextpnr-ice40 and fpga-icestorm (make test installs them)")  # fmt: skip
    return found


#: Seconds a synthesis or a place and route may take before it is given up.
TOOL_TIMEOUT_S = 600


def _run(args: list[str], what: str, cwd: Path) -> str:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False,
                              timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SynthesisError(f"{what} was given up after {TOOL_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        tail = said.splitlines()[-5:]
        full = "no BELs remaining" in said or "Unable to find a placement location" in said
        error = DoesNotFit if full else SynthesisError
        raise error(f"{what} failed: " + " | ".join(tail))
    return done.stdout


def synthesize(verilog: str, top: str, work: Path) -> Logic:
    """``verilog``'s module ``top`` through ``synth_ice40``: its cells (the netlist stays in
    ``work``/``top``.json for place and route)."""
    src = work / f"{top}.v"
    src.write_text(verilog)
    script = (f"read_verilog {src.name}; synth_ice40 -top {top} -json {top}.json; "
              f"tee -q -o {top}.stat.json stat -json")  # fmt: skip
    _run([_tool("yosys"), "-q", "-p", script], f"yosys on {top}", work)
    stat = json.loads((work / f"{top}.stat.json").read_text())
    cells: dict[str, int] = stat["design"]["num_cells_by_type"]
    return Logic(
        luts=cells.get("SB_LUT4", 0),
        carries=cells.get("SB_CARRY", 0),
        ffs=sum(n for kind, n in cells.items() if kind.startswith("SB_DFF")),
        brams=sum(n for kind, n in cells.items() if kind.startswith("SB_RAM40")),
    )


def place_and_route(top: str, work: Path, seeds: int = 1) -> float | None:
    """The maximum frequency (MHz) nextpnr reaches for ``top``'s netlist in ``work``: the
    median over ``seeds`` placements (its placer's seeds 1, 2, ...; one netlist's Fmax moves by
    a fifth from one seed, or one order of its ports, to another)."""
    got = []
    for seed in range(1, seeds + 1):
        log = f"{top}.pnr{seed}.log"
        _run([_tool("nextpnr-ice40"), *DEVICE, "--json", f"{top}.json",
              "--pcf-allow-unconstrained", "--timing-allow-fail", "--freq", "12", "--quiet",
              "--seed", str(seed), "--log", log], f"nextpnr-ice40 on {top}", work)  # fmt: skip
        found = _FMAX.findall((work / log).read_text())
        if found:
            got.append(float(found[-1]))
    return statistics.median(got) if got else None


def cost(
    name: str,
    params: list[str] | None = None,
    *,
    pnr: bool = True,
    bank: bool = True,
    seeds: int = 1,
) -> Cost:
    """Core ``name`` configured by ``params``: its logic alone and behind its bank, and the
    bank's maximum frequency, the median of ``seeds`` placements (``pnr`` off: None; ``bank``
    off: the core alone, twice)."""
    from streamscope.hw.cores import verilog

    with tempfile.TemporaryDirectory(prefix="streamscope-hw-") as tmp:
        work = Path(tmp)
        core = synthesize(verilog(name, params), f"ss_{name}", work)
        if not bank:
            return Cost(core, core, None)
        bank_top = f"ss_{name}_bank"
        banked = synthesize(verilog(name, params, bank=True), bank_top, work)
        try:
            fmax = place_and_route(bank_top, work, seeds) if pnr else None
        except DoesNotFit:
            return Cost(core, banked, None, fits=False)
    return Cost(core, banked, fmax)
