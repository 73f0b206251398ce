"""``streamscope hw``: the probe cores for FPGA designs (``streamscope.hw``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="hw",
    help="Probe cores for FPGA designs: list them, their register maps, Verilog and cost.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

_CORE = typer.Argument(help="The core (see `streamscope hw list`).")
_PARAM = typer.Option(
    "--param", "-p", metavar="NAME=VALUE", help="A core parameter (repeat for several)."
)


@app.command("list")
def list_cores() -> None:
    """Every core, what it is, and its parameters with their defaults."""
    from streamscope.hw.cores import CORES, core_info

    for name in sorted(CORES):
        info = core_info(name)
        params = " ".join(f"{k}={v}" for k, v in info.params.items())
        print(f"{name}: {info.about}\n    {params}")


@app.command("verilog")
def verilog(
    core: Annotated[str, _CORE],
    param: Annotated[list[str] | None, _PARAM] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write here (default: standard output).")
    ] = None,
    bank: Annotated[
        bool, typer.Option("--bank", help="Behind its register bank (module ss_CORE_bank).")
    ] = False,
) -> None:
    """The Verilog of a configured core (its top module is ss_CORE)."""
    from streamscope.hw.cores import verilog as make_verilog

    text = make_verilog(core, param or [], bank=bank)
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        top = f"ss_{core}_bank" if bank else f"ss_{core}"
        print(f"wrote {out} ({len(text.splitlines())} lines, module {top})", file=sys.stderr)


@app.command("map")
def register_map(
    core: Annotated[str, _CORE],
    param: Annotated[list[str] | None, _PARAM] = None,
) -> None:
    """The register map of a configured core behind its bank: word address, words, bits,
    access (rw: the host writes it; ro: it reads it)."""
    from streamscope.hw.cores import banked
    from streamscope.hw.link import MAGIC
    from streamscope.hw.regmap import MAGIC_ADDR

    bank = banked(core, param or [])
    print(f"{'addr':>6}  {'words':>5}  {'bits':>4}  access  register")
    for r in bank.registers:
        print(f"0x{r.addr:04x}  {r.words:>5}  {r.width:>4}  {r.access:<6}  {r.name}")
    print(f"0x{MAGIC_ADDR:04x}      1    32  ro      (magic: 0x{MAGIC:08x})")
    print(f"design-driven ports: {', '.join(sorted(bank.events))}")


@app.command("cost")
def cost(
    core: Annotated[str, _CORE],
    param: Annotated[list[str] | None, _PARAM] = None,
    pnr: Annotated[
        bool, typer.Option("--pnr/--no-pnr", help="Place and route for the maximum frequency.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """What a configured core costs on an iCE40 (Yosys, nextpnr): LUTs, carry cells, flip-flops
    and block RAMs, alone and behind its register bank, and the bank's maximum frequency."""
    import json

    from streamscope.hw.cost import DEVICE
    from streamscope.hw.cost import cost as core_cost

    c = core_cost(core, param or [], pnr=pnr)
    if as_json:
        print(json.dumps({"core": core, "params": param or [], **c.to_dict()}))
        return
    print(f"{'':<14}{'LUT4':>7}{'carry':>7}{'FF':>7}{'BRAM':>6}")
    for label, lg in (("core", c.core), ("behind bank", c.banked)):
        print(f"{label:<14}{lg.luts:>7}{lg.carries:>7}{lg.ffs:>7}{lg.brams:>6}")
    where = " ".join(DEVICE).replace("--", "")
    fmax = f"{c.fmax_mhz:.1f} MHz" if c.fmax_mhz is not None else "not placed (--no-pnr)"
    if not c.fits:
        fmax = "it does not fit the part"
    print(f"maximum frequency behind its bank ({where}): {fmax}")
