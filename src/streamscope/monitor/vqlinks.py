"""Which channels of a run are virtual queues, with the estimation loaded only where one is.

In: the run's topology and plan. Out: ``virtual_queues``, a ``VirtualQueue``
(``monitor/virtual.py``) for every link channel an occupancy query targets; for a run with none
(every program's) nothing, and the estimation and its queue models are never loaded (some 15 ms
of a monitor's start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamscope.core.tablerows import TableSink
    from streamscope.core.topology import Topology
    from streamscope.monitor.virtual import VirtualQueue
    from streamscope.query.plan import Plan

#: A virtual queue's two ends, in the order of their keys (``VirtualQueue.key`` + index).
SIDES = ("tail", "head")


def virtual_queues(
    topology: Topology,
    plan: Plan,
    on_table: TableSink | None,
    keep_truth: bool,
    tolerance: float,
) -> dict[str, VirtualQueue]:
    """``monitor.virtual.virtual_queues``, where the plan estimates any channel."""
    if not plan.estimated:
        return {}
    from streamscope.monitor import virtual

    return virtual.virtual_queues(topology, plan, on_table, keep_truth, tolerance)


__all__ = ["SIDES", "virtual_queues"]
