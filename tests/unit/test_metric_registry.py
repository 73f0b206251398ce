"""The metric registry is the one table a metric is added to: each metric has its builder
function, is exported by ``streamscope.query`` and ``streamscope``, says which way is better when
runs are compared, and a channel metric names the stream output its reducers take."""

from __future__ import annotations

import dataclasses

import streamscope as ss
import streamscope.query as q
from streamscope.analysis.delta import direction
from streamscope.query import builder
from streamscope.query.metrics import METRIC_NAMES, METRICS
from streamscope.reduction.channelstream import CHANNEL_FEEDS, ChannelOutput
from streamscope.reduction.reducers import TargetReducer


def test_every_metric_has_its_builder_and_public_name() -> None:
    assert sorted(builder.__all__) == sorted(METRIC_NAMES)
    assert ss.METRIC_NAMES == METRIC_NAMES  # written out there, so as to load no query module
    for name in METRIC_NAMES:
        assert getattr(q, name) is getattr(builder, name) is getattr(ss, name)
        assert name in q.__all__ and name in ss.__all__


def test_directions_and_feeds_come_from_the_registry() -> None:
    fields = {f.name for f in dataclasses.fields(ChannelOutput)}
    for m in METRICS.values():
        assert m.better in ("lower", "higher", "neutral")
        assert direction(m.name, "mean") == m.better
        if m.output:
            assert m.on_edge and m.output in fields
            assert hasattr(TargetReducer, f"add_{m.feed}")
    assert {name for name, _, _ in CHANNEL_FEEDS} == {
        "occupancy", "throughput", "count", "interinsertion", "interdeparture", "latency"
    }  # fmt: skip
    assert direction("throughput", "count") == "higher"
    assert direction("latency", "count") == "neutral"  # how many a frame saw
