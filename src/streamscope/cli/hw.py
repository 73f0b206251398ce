"""``streamscope hw``: the probe cores for FPGA designs (``streamscope.hw``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="hw",
    help="Probe cores for FPGA designs: list them, write their Verilog.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

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
    core: Annotated[str, typer.Argument(help="The core (see `streamscope hw list`).")],
    param: Annotated[list[str] | None, _PARAM] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write here (default: standard output).")
    ] = None,
) -> None:
    """The Verilog of a configured core (its top module is ss_CORE)."""
    from streamscope.hw.cores import verilog as make_verilog

    text = make_verilog(core, param or [])
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        print(f"wrote {out} ({len(text.splitlines())} lines, module ss_{core})", file=sys.stderr)
