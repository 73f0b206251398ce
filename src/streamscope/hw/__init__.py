"""Probe cores in Amaranth HDL (seeds 001 and 003): synthesizable counterparts of
``streamscope.probes``, their simulation, Verilog and cost in logic.

In: a core's parameters (widths, depths). Out: an Amaranth component a design instantiates, and
through ``back``, its Verilog. Nothing here runs while streamscope monitors a Python pipeline;
``amaranth`` is imported only by these modules.
"""
