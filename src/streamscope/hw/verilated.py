"""A register bank compiled by Verilator: the same ``RegisterLink`` as ``hw.sim.SimulatedLink``,
for runs too long for Amaranth's simulator.

In: a ``RegisterBank`` (its Verilog, from Amaranth). Out: ``VerilatedLink``, with ``read``,
``write``, ``play`` and ``cycles`` as the simulated link has them, cycle for cycle the same
design, driven through a small C harness in a shared library (``ctypes``). Building it takes
Verilator and a C++ compiler (Debian's ``verilator`` and ``g++``) and some seconds; the library is
kept under ``~/.cache/streamscope/verilator`` by a hash of the design, so a second run of the same
configuration starts at once.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamscope.core.config import CACHE_DIR
from streamscope.core.errors import ConfigError
from streamscope.hw.link import ADDR_BITS, BANK_SPAN
from streamscope.hw.regmap import RegisterBank

#: Where built libraries are kept (``core.config.CACHE_DIR``).
_CACHE = CACHE_DIR / "verilator"

_HARNESS = """
#include <cstdint>
#include "Vtop.h"
#include "verilated.h"

struct Dut {{ VerilatedContext ctx; Vtop* top; uint64_t cycles; }};

static void tick(Dut* d) {{
    d->top->clk = 1; d->top->eval(); d->top->clk = 0; d->top->eval(); d->cycles++;
}}

static void set(Vtop* t, int port, uint64_t v) {{
    switch (port) {{
{sets}
    }}
}}

extern "C" {{
void* ss_new() {{
    Dut* d = new Dut; d->top = new Vtop{{&d->ctx}}; d->cycles = 0;
    d->top->clk = 0; d->top->rst = 1; d->top->eval(); tick(d); d->top->rst = 0; d->top->eval();
    d->cycles = 0;
    return d;
}}
void ss_free(void* p) {{ Dut* d = (Dut*)p; d->top->final(); delete d->top; delete d; }}
uint64_t ss_cycles(void* p) {{ return ((Dut*)p)->cycles; }}
/* rows: for each row, its count of (port, value) pairs; then the pairs, row after row */
void ss_play(void* p, int nrows, const int32_t* counts, const int32_t* ports,
             const uint64_t* values) {{
    Dut* d = (Dut*)p; int k = 0;
    for (int r = 0; r < nrows; r++) {{
        int k0 = k;
        for (int j = 0; j < counts[r]; j++, k++) set(d->top, ports[k], values[k]);
        tick(d);
        for (int j = k0; j < k; j++) set(d->top, ports[j], 0);
    }}
}}
uint32_t ss_read(void* p, uint32_t addr) {{
    Dut* d = (Dut*)p; d->top->addr = addr; d->top->r_en = 1; tick(d); d->top->r_en = 0;
    d->top->eval(); return d->top->r_data;
}}
void ss_write(void* p, uint32_t addr, uint32_t value) {{
    Dut* d = (Dut*)p; d->top->addr = addr; d->top->w_data = value; d->top->w_en = 1; tick(d);
    d->top->w_en = 0; d->top->eval();
}}
}}
"""


def available() -> bool:
    """Whether this machine can build a verilated link (Verilator and a C++ compiler)."""
    return shutil.which("verilator") is not None and shutil.which("g++") is not None


def _ports(bank: RegisterBank) -> list[tuple[Any, str]]:
    """The design's inputs of ``bank`` (its events): (Amaranth signal, Verilog port name)."""
    out = []
    for name in sorted(bank.events):
        port = getattr(bank, name)
        member = bank.signature.members[name]
        if member.dimensions:
            out += [(port[i], f"{name}__{i}") for i in range(member.dimensions[0])]
        else:
            out.append((port, name))
    for sig, vname in out:
        if len(sig) > 64:
            raise ConfigError(
                f"port {vname} is {len(sig)} bits: a verilated link drives 64 at most"
            )
    return out


def build(bank: RegisterBank) -> Path:
    """The shared library of ``bank`` (built, or found in the cache)."""
    from amaranth.back import verilog

    if not available():
        raise ConfigError(
            "a verilated link needs Verilator and g++ (Debian: apt-get install verilator g++)"
        )
    text = str(verilog.convert(bank, name="top"))
    ports = _ports(bank)
    # (Verilator spells a double underscore in a name "___05F")
    sets = "\n".join(
        f"        case {k}: t->{vname.replace('__', '___05F')} = v; break;"
        for k, (_, vname) in enumerate(ports)
    )
    harness = _HARNESS.format(sets=sets)
    version = subprocess.run(
        ["verilator", "--version"], capture_output=True, text=True, check=False
    ).stdout
    key = hashlib.sha256((text + harness + version).encode()).hexdigest()[:16]
    lib = _CACHE / key / "libtop.so"
    if lib.exists():
        return lib
    runtime = _runtime(version)
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        work = Path(tmp)
        (work / "top.v").write_text(text)
        (work / "harness.cpp").write_text(harness)
        # g++ -O1: the storage core of 8 probes builds in 3.6 s rather than 7.8 (-O2), and
        # runs as fast (benchmarks/bench_rtl_sim.py).
        cmd = [
            "verilator", "--cc", "top.v", "--build", "-j", "2", "-O2", "-Wno-fatal",
            "-CFLAGS", "-fPIC -O1", "--top-module", "top", "--prefix", "Vtop", "-Mdir", "obj",
        ]  # fmt: skip
        _compile(cmd, work, "verilator could not build the core")
        include = _verilator_include()
        link = [
            "g++", "-shared", "-fPIC", "-O2", "-std=c++17", "-pthread", f"-I{include}",
            f"-I{include}/vltstd", "-Iobj", "-o", "libtop.so", "harness.cpp",
            *map(str, runtime), "obj/Vtop__ALL.a",
        ]  # fmt: skip
        _compile(link, work, "could not link the verilated core")
        os.replace(work / "libtop.so", lib)
    return lib


#: Verilator's runtime, compiled once for every core (about 4 s of g++ a build otherwise).
_RUNTIME = ("verilated", "verilated_threads")


def _runtime(version: str) -> list[Path]:
    """The object files of Verilator's runtime for this ``version`` (compiled, or found)."""
    where = _CACHE / ("runtime-" + hashlib.sha256(version.encode()).hexdigest()[:16])
    objects = [where / f"{name}.o" for name in _RUNTIME]
    if all(o.exists() for o in objects):
        return objects
    where.mkdir(parents=True, exist_ok=True)
    include = _verilator_include()
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        for name, obj in zip(_RUNTIME, objects, strict=True):
            cmd = [
                "g++", "-c", "-fPIC", "-O2", "-std=c++17", "-pthread", f"-I{include}",
                f"-I{include}/vltstd", "-o", f"{name}.o", f"{include}/{name}.cpp",
            ]  # fmt: skip
            _compile(cmd, Path(tmp), "could not compile Verilator's runtime")
            os.replace(Path(tmp) / f"{name}.o", obj)  # whole files only: a rename
    return objects


def _compile(cmd: list[str], cwd: Path, failed: str) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ConfigError(f"{failed}:\n{done.stderr[-2000:]}")


def _verilator_include() -> str:
    """Where Verilator's runtime sources are (``verilator --getenv VERILATOR_ROOT``)."""
    root = subprocess.run(
        ["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return str(Path(root or "/usr/share/verilator") / "include")


class VerilatedLink:
    """``bank`` compiled by Verilator, at word 0: see the module."""

    def __init__(self, bank: RegisterBank) -> None:
        self.banks = [bank]
        self._index = {id(sig): k for k, (sig, _) in enumerate(_ports(bank))}
        lib = ctypes.CDLL(str(build(bank)))
        lib.ss_new.restype = ctypes.c_void_p
        lib.ss_free.argtypes = [ctypes.c_void_p]
        lib.ss_cycles.argtypes = [ctypes.c_void_p]
        lib.ss_cycles.restype = ctypes.c_uint64
        lib.ss_play.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p]  # fmt: skip
        lib.ss_read.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        lib.ss_read.restype = ctypes.c_uint32
        lib.ss_write.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
        self._lib = lib
        self._dut: int | None = lib.ss_new()
        self._lock = threading.Lock()

    @property
    def cycles(self) -> int:
        with self._lock:
            return int(self._lib.ss_cycles(self._live()))

    def _live(self) -> int:
        if self._dut is None:
            raise RuntimeError("the verilated link is closed")
        return self._dut

    def read(self, addr: int) -> int:
        if addr >> ADDR_BITS:
            return 0  # no bank there
        with self._lock:
            return int(self._lib.ss_read(self._live(), addr & (BANK_SPAN - 1)))

    def write(self, addr: int, value: int) -> None:
        if addr >> ADDR_BITS:
            return
        with self._lock:
            self._lib.ss_write(self._live(), addr & (BANK_SPAN - 1), value & 0xFFFFFFFF)

    def play(self, rows: Sequence[Sequence[tuple[Any, int]]]) -> None:
        """Run ``len(rows)`` cycles, each with its (signal, value) pairs driven."""
        if not rows:
            return
        counts = (ctypes.c_int32 * len(rows))(*(len(r) for r in rows))
        flat = [pair for row in rows for pair in row]
        ports = (ctypes.c_int32 * max(len(flat), 1))(*(self._index[id(s)] for s, _ in flat))
        values = (ctypes.c_uint64 * max(len(flat), 1))(*(v & (2**64 - 1) for _, v in flat))
        with self._lock:
            self._lib.ss_play(self._live(), len(rows), counts, ports, values)

    def close(self) -> None:
        with self._lock:
            if self._dut is not None:
                self._lib.ss_free(self._dut)
                self._dut = None
