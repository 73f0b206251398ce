"""Kinds of resource: what each means where stages run and channels cross, one module each.

In: a ``Resource``. Out: its kind (``kind_of``), answering ``ResourceKind``.

Its modules: ``base`` (the questions, and the rules for a channel between two kinds; how to
add a kind), one per kind -- ``thread``, ``asyncio``, ``process``, ``device`` (emulated),
``rtl`` (a device whose probes are the simulated probe cores), ``host`` (a cluster's) -- and
``registry`` (the table).
"""

from __future__ import annotations

from streamscope.pipeline.kinds.base import ResourceKind, RunsIn, channel_transport, link_end
from streamscope.pipeline.kinds.registry import KINDS, RTL, kind_of

__all__ = [
    "KINDS",
    "RTL",
    "ResourceKind",
    "RunsIn",
    "channel_transport",
    "kind_of",
    "link_end",
]
