"""Shared helpers of the oracle tests: the examples as modules, W1, monitored histograms.

In: an example's name, or a run and the query/channel to read. Out: the module, or the
time-weighted occupancy summed over the run's frames.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import psutil
from numpy.typing import NDArray

from streamscope.aggregate.points import HistogramPoint
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.monitor import PROCESS_NAME
from streamscope.store.reader import Run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: The monitor process's module.
MONITOR = "streamscope.monitor"
BENCHMARKS = EXAMPLES.parent / "benchmarks"
F64 = NDArray[np.float64]

#: src -> work -> sink on one thread, both channels of capacity 4, the first one's ends probed:
#: the topology of runs tests build in memory.
THREE_STAGES = Topology(
    "t",
    (ResourceInfo("main", "thread"),),
    (
        StageInfo("src", "main", "source"),
        StageInfo("work", "main", "stage"),
        StageInfo("sink", "main", "sink"),
    ),
    (ChannelInfo("src -> work", "src", "work", 4), ChannelInfo("work -> sink", "work", "sink", 4)),
    (ProbeInfo(1, "tail", "src -> work"), ProbeInfo(2, "head", "src -> work")),
)


@cache
def example(name: str) -> ModuleType:
    """``examples/NAME.py`` imported as a module (its directory on the path for its imports)."""
    return _load(EXAMPLES, name, f"{name}_example")


@cache
def benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` imported as a module (a benchmark's checks, or a helper of the
    benchmarks' such as ``_clocktruth``, held by a test to its targets)."""
    return _load(BENCHMARKS, name, name)


def _load(directory: Path, name: str, as_name: str) -> ModuleType:
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location(as_name, directory / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def w1(p: F64, q: F64) -> float:
    """Wasserstein-1 between two distributions on the same consecutive integer levels (items)."""
    return float(np.abs(np.cumsum(p) - np.cumsum(q)).sum())


def occupancy_ns(r: Run, query_id: int, edge: str, capacity: int) -> tuple[F64, int]:
    """ns the channel held each level 0..capacity, summed over every frame, and the covered time.

    The query's histogram must have one bin per level: nothing may fall outside it.
    """
    frames = r.results(query_id, edge)
    assert frames, "the monitor stored no occupancy frames"
    weights = np.zeros(capacity + 1)
    for fr in frames:
        h = fr.point("histogram")
        assert isinstance(h, HistogramPoint)
        assert h.under == 0 and h.over == 0, f"frame {fr.frame}: under={h.under} over={h.over}"
        weights += np.asarray(h.weights)
    return weights, sum(fr.covered_ns for fr in frames)


def is_monitor(p: psutil.Process) -> bool:
    """Whether ``p`` is a run's monitor process: started afresh (``python -m
    streamscope.monitor``), or forked from ``streamscope run`` (named ``PROCESS_NAME``)."""
    try:
        return p.name() == PROCESS_NAME or MONITOR in " ".join(p.cmdline())
    except psutil.Error:
        return False


def ray_processes() -> list[str]:
    """Ray's own processes among this process's descendants (a cluster's nodes and workers)."""
    out = []
    for p in psutil.Process(os.getpid()).children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "raylet" in line or "gcs_server" in line or "ray::" in line or "default_worker" in line:
            out.append(f"{p.pid} {line[:120]}")
    return out


def ray_processes_left(wait_s: float = 5.0) -> list[str]:
    """Ray's processes still there after up to ``wait_s`` for those told to end to go."""
    left = ray_processes()
    for _ in range(int(wait_s / 0.1)):
        if not left:
            break
        psutil.wait_procs(psutil.Process(os.getpid()).children(recursive=True), timeout=0.1)
        left = ray_processes()
    return left


def held_bounds(truth: Path, capacity: int) -> tuple[float, float]:
    """The least and the most time ``examples/mm1.py``'s items can have spent in ``source ->
    server`` (item-ns, summed), from the application's own stamps around every put and get
    (``--truth``): a put began after its item was due and after the get of the item
    ``capacity`` places ahead (the channel holds no more), and was done when the source
    resumed; a get came after its put and after the server was done with the item before, and
    before the server's first act on it. Whatever holds a thread back between a tap and a stamp,
    the monitor's time-weighted occupancy summed over the run lies between the two."""
    due, inserted = np.load(truth / "due.npy"), np.load(truth / "inserted.npy")
    removed, served = np.load(truth / "removed.npy"), np.load(truth / "served.npy")
    done_before = np.concatenate(([0], (removed + served)[:-1]))
    put_lo = due.astype(np.float64)
    got_lo = np.zeros(len(removed))
    for k in range(len(removed)):  # each bound leans on one ``capacity`` places ahead
        if k >= capacity:
            put_lo[k] = max(put_lo[k], got_lo[k - capacity])
        got_lo[k] = max(put_lo[k], done_before[k])
    least = float(np.clip(got_lo - inserted, 0, None).sum())
    most = float((removed - put_lo).sum())
    return least, most
