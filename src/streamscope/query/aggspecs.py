"""Which aggregations a query's targets get: its own, in written order, or its metric's
defaults (a channel's histogram levels from its capacity).
"""

from __future__ import annotations

from streamscope.aggregate.specs import (
    AggregationSpec,
    Count,
    Duty,
    First,
    Histogram,
    Last,
    Max,
    Mean,
    Min,
    Quantiles,
    Sum,
)
from streamscope.core.errors import QueryError
from streamscope.core.records import STATE_LABELS
from streamscope.core.topology import ChannelInfo
from streamscope.query.ast import (
    Agg,
    HistogramAgg,
    Origin,
    PercentileAgg,
    QuantilesAgg,
    Query,
    StatAgg,
)
from streamscope.query.metrics import BOX_QUANTILES, METRICS

__all__ = ["LEVEL_BINS", "query_specs"]

_SIMPLE_SPECS: dict[str, AggregationSpec] = {
    "count": Count(),
    "sum": Sum(),
    "min": Min(),
    "max": Max(),
    "mean": Mean(),
    "first": First(),
    "last": Last(),
    "duty": Duty(STATE_LABELS),
}


#: A bare histogram of a channel of up to this capacity has a bin per level; of a larger one,
#: doubling bins (``Histogram.doubling_to``): a frame of a queue of 10,000 is not 10,002 rows,
#: and how often it was empty or full is still known.
LEVEL_BINS = 256


def query_specs(
    query: Query, channels: list[ChannelInfo], origin: Origin
) -> tuple[AggregationSpec, ...]:
    """The query's specs in written order; all quantiles merge into one ``Quantiles`` spec at
    the place of the first. A bare histogram gets levels ``0..capacity`` (largest matched;
    past ``LEVEL_BINS``, doubling bins with empty and full each a bin of its own);
    the default one of channels with no fixed capacity, doubling bins (``Histogram.doubling``),
    so that how often they were empty is known."""
    written = bool(query.aggregations)
    aggs = query.aggregations or _defaults(query.metric)
    specs: list[AggregationSpec] = []
    qs = tuple(dict.fromkeys(q for a in aggs for q in _quantiles_of(a)))
    for agg in aggs:
        if isinstance(agg, StatAgg) and agg.name != "box":
            specs.append(_SIMPLE_SPECS[agg.name])
        elif isinstance(agg, PercentileAgg | QuantilesAgg | StatAgg):
            if not any(isinstance(s, Quantiles) for s in specs):
                specs.append(Quantiles(qs))
        elif agg.levels is not None:
            specs.append(Histogram.levels(*agg.levels))
        elif agg.edges is not None:
            specs.append(Histogram(tuple(float(e) for e in agg.edges)))
        elif agg.span is not None and agg.width is not None:
            lo, hi = agg.span
            specs.append(Histogram.from_range(float(lo), float(hi), float(agg.width)))
        else:
            capacity = max((c.capacity for c in channels), default=0)
            if 1 <= capacity <= LEVEL_BINS:
                specs.append(Histogram.levels(0, capacity))
            elif capacity > LEVEL_BINS:
                specs.append(Histogram.doubling_to(capacity))
            elif not written:
                specs.append(Histogram.doubling())
            else:
                raise QueryError(
                    f"{channels[0].name if channels else 'this channel'} has no fixed capacity, "
                    "so a bare histogram has no levels: give histogram(bins=LO..HI)",
                    text=origin.text,
                    line=origin.line,
                    column=origin.columns[0],
                    source=origin.source,
                )
    return tuple(specs)


def _quantiles_of(agg: Agg) -> tuple[float, ...]:
    if isinstance(agg, PercentileAgg):
        return (agg.q,)
    if isinstance(agg, QuantilesAgg):
        return agg.qs
    if isinstance(agg, StatAgg) and agg.name == "box":
        return BOX_QUANTILES
    return ()


def _defaults(metric: str) -> tuple[Agg, ...]:
    out: list[Agg] = []
    for name in METRICS[metric].defaults:
        if name == "histogram":
            out.append(HistogramAgg())
        elif name.startswith("p"):
            out.append(PercentileAgg(float(name[1:])))
        else:
            out.append(StatAgg(name))
    return tuple(out)
