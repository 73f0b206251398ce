"""The probe cores a user can generate, by name, with their parameters.

In: a core's name and parameters as ``name=value`` text (from the command line). Out: the
configured Amaranth component, and its Verilog (``verilog``), which a design instantiates.
Every bad name or value is a ``ConfigError`` that says which and what is allowed.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamscope.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CoreInfo:
    """One core: what it is and how to make it (``params``: name -> default); ``events``: the
    inputs its design drives each cycle (the rest are registers, ``hw.regmap``)."""

    name: str
    about: str
    make: Callable[..., Any]
    params: Mapping[str, int]
    events: frozenset[str]


def _defaults(fn: Callable[..., Any]) -> dict[str, int]:
    return {
        name: int(p.default)
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _core(module: str, cls: str, about: str) -> Callable[[], CoreInfo]:
    """A core class ``streamscope.hw.<module>.<cls>``, imported when asked for (amaranth is)."""

    def info() -> CoreInfo:
        made = getattr(importlib.import_module(f"streamscope.hw.{module}"), cls)
        name = next(k for k, v in CORES.items() if v is info)
        return CoreInfo(name, about, made, _defaults(made.__init__), made.EVENTS)

    return info


CORES: dict[str, Callable[[], CoreInfo]] = {
    "channel": _core(
        "channel",
        "ChannelMonitor",
        "the channel monitor of Lancaster et al., Crossing Boundaries in TimeTrial (2011): a FIFO"
        " channel's counts, occupancy and gap histograms per frame, reduced on the device as the "
        "host's sub-queue reducer does",
    ),
    "trigger": _core(
        "trigger",
        "TriggerProbe",
        "the integrated probe of DeVille, Troxel & George, Performance Monitoring for Run-time "
        "Management of Reconfigurable Devices (2005): a sequence trigger with masks, an event "
        "counter with its wraps, a sample-and-hold register, a global trigger in and out",
    ),
    "profile": _core(
        "profile",
        "StateProfile",
        "the profile counters of Curreri et al., Performance Analysis Framework for High-Level "
        "Language Applications in Reconfigurable Computing (2010): the cycles a stage spends in "
        "each state, per frame",
    ),
    "central": _core(
        "storage",
        "CentralStorageCore",
        "the centralised storage of DeVille, Troxel & George (2005): one buffer for every probe "
        "behind a round-robin arbiter, contention and overflow drops counted per probe",
    ),
    "timestamp": _core(
        "timestamp",
        "Timestamp",
        "the device's clock (the FPGA agent of Lancaster et al., Crossing Boundaries in "
        "TimeTrial, 2011): a cycle counter answering calibration round trips",
    ),
    "distributed": _core(
        "storage",
        "DistributedStorageCore",
        "the distributed storage of DeVille, Troxel & George (2005): a buffer per probe, overflow"
        " drops counted",
    ),
}


def core_info(name: str) -> CoreInfo:
    if name not in CORES:
        raise ConfigError(f"no probe core {name!r}; the cores are: {', '.join(sorted(CORES))}")
    return CORES[name]()


def parse_params(info: CoreInfo, items: list[str]) -> dict[str, int]:
    """``["width=8", ...]`` -> the core's parameters, defaults for the rest."""
    out = dict(info.params)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in info.params:
            allowed = ", ".join(f"{k}={v}" for k, v in info.params.items())
            raise ConfigError(f"core {info.name!r}: {item!r} is not NAME=VALUE for one of its "
                              f"parameters ({allowed})")  # fmt: skip
        try:
            out[key] = int(value, 0)
        except ValueError:
            raise ConfigError(
                f"core {info.name!r}: {key} must be an integer, not {value!r}"
            ) from None
    return out


def make(name: str, params: list[str] | None = None) -> tuple[CoreInfo, dict[str, int], Any]:
    """The core ``name`` configured by ``params`` (ConfigError for a value it refuses)."""
    info = core_info(name)
    values = parse_params(info, params or [])
    try:
        return info, values, info.make(**values)
    except ValueError as exc:
        raise ConfigError(f"core {name!r} with {values}: {exc}") from None


def banked(name: str, params: list[str] | None = None) -> Any:
    """Core ``name`` behind its register bank (``hw.regmap``)."""
    from streamscope.hw.regmap import RegisterBank

    _, _, core = make(name, params)
    return RegisterBank(core, core.EVENTS)  # (a core's own: a parameter may add one)


def verilog(name: str, params: list[str] | None = None, *, bank: bool = False) -> str:
    """The Verilog of core ``name`` (top module ``ss_<name>``; ``bank``: behind its register
    bank, ``ss_<name>_bank``)."""
    from amaranth.back import verilog as back

    if bank:
        return str(back.convert(banked(name, params), name=f"ss_{name}_bank"))
    _, _, core = make(name, params)
    return str(back.convert(core, name=f"ss_{name}"))
