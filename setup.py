"""Builds the native probe core, the queue models' compiled loops and the pipeline simulator's
event loop; everything else is in pyproject.toml.

The extensions are optional: where they cannot be compiled, the install goes on and streamscope
uses the core's pure-Python twin (``streamscope.core.native.IMPLEMENTATION`` says which is in use)
and the models' Python loops.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamscope.core._native",
            sources=["src/streamscope/core/_native.c"],
            # What it includes: its parts, each beside its twin, and the ring layout generated
            # from core/rings.py (core/_ringheader.py).
            depends=[
                *(
                    f"src/streamscope/core/_native_{part}.c"
                    for part in ("clock", "ring", "state", "fifo", "stacks", "guard")
                ),
                "src/streamscope/core/_native_layout.h",
            ],
            # The emulated clock must compute exactly what its Python twin does: no fused
            # multiply-add, IEEE doubles as written.
            extra_compile_args=["-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
        Extension(
            "streamscope.model._kernels",
            sources=["src/streamscope/model/_kernels.c"],
            # Bit for bit what the Python loops compute: IEEE doubles as written.
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            "streamscope.model._netsim",
            sources=["src/streamscope/model/_network.c"],
            # What it includes: its parts (containers, the cores and locks, the steps and loop).
            depends=[
                f"src/streamscope/model/_network_{part}.c"
                for part in ("containers", "cores", "steps")
            ],
            # Step for step what model/network.py's event loop computes: IEEE doubles as written.
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
    ],
)
