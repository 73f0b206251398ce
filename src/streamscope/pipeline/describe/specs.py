"""The parts of a pipeline as ``Pipeline`` records them, each a frozen spec.

In: what a program asks of its ``Pipeline``, checked there. Out: stage, channel, probe storage
and tracing specs, and the choices they allow (fan-out, fan-in, storage schemes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamscope.core.topology import ITERATION_KINDS
from streamscope.pipeline.describe.resources import Resource

FANOUT = ("roundrobin", "broadcast")
#: The timer a stage on an asyncio loop measures its loop's lag with (the loop's first stage).
LOOP_LAG = "loop_lag"
STORAGE_SCHEMES = ("centralized", "distributed")
FANIN = ("roundrobin", "zip")


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A stage: its code (``obj``), where it runs, and how it spreads and gathers items."""

    name: str
    obj: Any
    resource: Resource
    fanout: str
    fanin: str


@dataclass(frozen=True, slots=True)
class StorageSpec:
    """A resource's centralised probe storage: a shared buffer of ``capacity`` records with
    ``ports`` write ports per clock cycle, and a hold register of ``hold`` samples per probe."""

    ports: int = 2
    capacity: int = 1 << 16
    hold: int = 1
    cycle_ticks: int = 1


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """Function tracing (Castells-Rufas et al., Performance Analysis Techniques for
    Multi-Soft-Core and Many-Soft-Core Systems, 2012): the functions of ``modules`` (``"pkg.mod"`` or
    ``"pkg.mod:pattern"``) and of the traced stages' own code, called by the threads of the
    stages matching ``stages``; ``exclude``: name patterns left alone; ``max_calls_per_s``:
    functions called faster are left alone from then on."""

    modules: tuple[str, ...] = ()
    stages: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()
    max_calls_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """A channel from ``src`` to ``dst`` of ``capacity`` items (``slot_bytes`` each, crossing
    processes)."""

    name: str
    src: str
    dst: str
    capacity: int
    slot_bytes: int


__all__ = [
    "FANIN",
    "FANOUT",
    "ITERATION_KINDS",
    "LOOP_LAG",
    "STORAGE_SCHEMES",
    "ChannelSpec",
    "StageSpec",
    "StorageSpec",
    "TraceSpec",
]
