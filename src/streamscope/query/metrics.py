"""The metric vocabulary: what each metric measures, on what target, in what unit, with which taps.

Pure data read by the parser (validation), the printer and the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """One metric. ``on_edge``: the target is ``SRC -> DST`` (else a stage name).
    ``taps``: probe kinds that must be active on the target (``tail``, ``head``, ``state``).
    ``time_valued``: values are nanoseconds, so histogram arguments may carry duration units.
    ``probe``: the kind of declared probe (``Pipeline.probe``) the target names, as
    ``STAGE.NAME``; empty when the target is a channel or a stage. ``better``: which way a
    change is an improvement when two runs are compared (``lower``, ``higher`` or ``neutral``).
    A channel metric's reducers take the field ``output`` of its stream's output
    (``reduction.channelstream.ChannelOutput``) through their ``add_<feed>`` (``segments``,
    ``events`` or ``times``); ``quality``: its frames also carry the clocks' quality figures
    when the channel crosses clock domains. A new metric is one entry here, its stream's code,
    and its builder function (``query.builder``)."""

    name: str
    unit: str
    on_edge: bool
    taps: tuple[str, ...]
    time_valued: bool
    levels: bool
    defaults: tuple[str, ...]
    about: str
    probe: str = ""
    better: str = "neutral"
    output: str = ""
    feed: str = ""
    quality: bool = False
    #: Its target may also be a path, ``SRC ~> DST``: items followed from one stage to another
    #: through the stages and channels between them.
    on_path: bool = False


METRICS: dict[str, MetricInfo] = {
    m.name: m
    for m in (
        MetricInfo(
            "occupancy",
            "items",
            on_edge=True,
            taps=("tail", "head"),
            time_valued=False,
            levels=True,
            defaults=("mean", "max", "histogram"),
            about="time-weighted items in the channel",
            better="lower",
            output="occupancy",
            feed="segments",
            quality=True,
        ),
        MetricInfo(
            "throughput",
            "items/s",
            on_edge=True,
            taps=("head",),
            time_valued=False,
            levels=False,
            defaults=("mean",),
            about="items per second removed at the head, sampled over sub-windows of the frame",
            better="higher",
            output="removals",
            feed="times",
            quality=True,
        ),
        MetricInfo(
            "count",
            "items",
            on_edge=True,
            taps=("tail",),
            time_valued=False,
            levels=True,
            defaults=("sum",),
            about="items inserted at the tail, per frame",
            better="higher",
            output="insertions",
            feed="times",
            quality=True,
        ),
        MetricInfo(
            "interinsertion",
            "ns",
            on_edge=True,
            taps=("tail",),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds between successive insertions",
            better="lower",
            output="interinsertion",
            feed="events",
        ),
        MetricInfo(
            "interdeparture",
            "ns",
            on_edge=True,
            taps=("head",),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds between successive removals",
            better="lower",
            output="interdeparture",
            feed="events",
        ),
        MetricInfo(
            "latency",
            "ns",
            on_edge=True,
            taps=("tail", "head"),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds an item spent in the channel (SRC -> DST), or from leaving SRC "
            "until what became of it reached DST (SRC ~> DST)",
            better="lower",
            output="latency",
            feed="events",
            quality=True,
            on_path=True,
        ),
        MetricInfo(
            "state",
            "state",
            on_edge=False,
            taps=("state",),
            time_valued=False,
            levels=False,
            defaults=("duty",),
            about="fraction of time a stage is idle, busy, blocked_in or blocked_out",
        ),
        MetricInfo(
            "iteration",
            "ns",
            on_edge=False,
            taps=("iteration",),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds of each loop iteration: from taking an input to having emitted "
            "its outputs",
        ),
        MetricInfo(
            "input_wait",
            "ns",
            on_edge=False,
            taps=("input_wait",),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds each loop iteration waited for its input",
        ),
        MetricInfo(
            "output_wait",
            "ns",
            on_edge=False,
            taps=("output_wait",),
            time_valued=True,
            levels=False,
            defaults=("mean", "p50", "p99"),
            about="nanoseconds each loop iteration spent in output calls (blocked or not)",
        ),
        MetricInfo(
            "sample",
            "value",
            on_edge=False,
            taps=("sampler",),
            time_valued=False,
            levels=False,
            defaults=("count", "mean", "max"),
            about="values captured by a declared sampler probe (STAGE.NAME)",
            probe="sampler",
        ),
        MetricInfo(
            "counter",
            "events",
            on_edge=False,
            taps=("counter",),
            time_valued=False,
            levels=False,
            defaults=("sum",),
            about="events counted by a declared counter probe (STAGE.NAME), per frame",
            probe="counter",
        ),
        MetricInfo(
            "timer",
            "ns",
            on_edge=False,
            taps=("timer",),
            time_valued=True,
            levels=False,
            defaults=("count", "mean", "p99"),
            about="nanoseconds of each start-stop interval of a declared timer probe (STAGE.NAME)",
            probe="timer",
        ),
    )
}

METRIC_NAMES: tuple[str, ...] = tuple(METRICS)

#: Aggregations that take no arguments. ``duty`` applies to ``state`` only, and is all it takes.
SIMPLE_AGGREGATIONS: tuple[str, ...] = (
    "count", "sum", "min", "max", "mean", "first", "last", "box", "duty",
)  # fmt: skip
#: ``box``: a box-whisker summary, the quantiles 0, 0.25, 0.5, 0.75 and 1.
BOX_QUANTILES: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)

#: How the language spells every aggregation, for "valid ..." hints.
AGGREGATION_FORMS: tuple[str, ...] = (
    "count",
    "sum",
    "min",
    "max",
    "mean",
    "first",
    "last",
    "box",
    "pNN (e.g. p99)",
    "quantiles(q, ...)",
    "histogram(...)",
)

#: Histogram bins beyond this are refused: a typo in a width should not allocate gigabytes.
MAX_BINS = 100_000
