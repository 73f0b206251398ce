"""Probe cores in Amaranth HDL (after DeVille, Troxel & George, Performance Monitoring for Run-time
Management of Reconfigurable Devices, 2005, and Curreri, Koehler, George, Holland & Garcia,
Performance Analysis Framework for High-Level Language Applications in Reconfigurable Computing,
2010): synthesizable counterparts of ``streamscope.probes``, their simulation, Verilog and cost in
logic.

In: a core's parameters (widths, depths). Out: an Amaranth component a design instantiates, and
through ``back``, its Verilog. Nothing here runs while streamscope monitors a Python pipeline;
``amaranth`` is imported only by these modules.
"""
