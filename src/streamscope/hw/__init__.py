"""Probe cores in Amaranth HDL (after DeVille, Troxel & George, Performance Monitoring for Run-time
Management of Reconfigurable Devices, 2005, and Curreri, Koehler, George, Holland & Garcia,
Performance Analysis Framework for High-Level Language Applications in Reconfigurable Computing,
2010): synthesizable counterparts of ``streamscope.probes``, their simulation, Verilog and cost in
logic.

In: a core's parameters (widths, depths). Out: an Amaranth component a design instantiates, and
through ``back``, its Verilog. Nothing here runs while streamscope monitors a Python pipeline;
``amaranth`` is imported only by these modules, and importing any of them without it is a
``MissingExtraError`` naming ``streamscope[hw]``.
"""

from streamscope.core.extras import require

# Every module here builds, simulates or reads a core written in Amaranth: asking once, as the
# package is imported, says which extra is missing rather than failing deep in one of them.
require("amaranth")
