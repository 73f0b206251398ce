"""The run file's tables, in order, and the values its columns hold.

In: the declared tables (the run's description here; results, clocks and per-stage figures in
their own modules). Out: ``TABLES``, the DDL that creates an empty run file, SCHEMA.md's tables.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from streamscope.core.errors import RunFileError
from streamscope.core.modes import RunStatus
from streamscope.store._clocktables import CALIBRATION, CLOCK_FIT, CLOCK_TRUTH, FLIGHT, RECORD
from streamscope.store._resulttables import (
    DROPS,
    FRAME,
    HISTOGRAM,
    STAT,
    VIRTUAL_QUEUE,
    VQ_FRAME,
    VQ_LEVEL,
)
from streamscope.store._stagetables import (
    CORE,
    ENDED,
    HOST,
    LEFTOVER,
    LINK,
    MACHINE,
    MONITOR,
    NOTE,
    OVERHEAD,
    PROFILE,
    RUNNER,
    SERVICE,
    STACK_ID,
    STACK_SAMPLER,
    STACKS,
    STALL,
    TRACE_EXCLUSION,
    WORKER,
)
from streamscope.store.table import Column, Table

FORMAT = "streamscope-run"
SCHEMA_VERSION = 18
STATUSES = tuple(s.value for s in RunStatus)
UNDER_BIN = -1
OVER_BIN = -2


_C = Column
_STATUS_CHECK = ", ".join(f"'{s}'" for s in STATUSES)


def quantile_stat(q: float) -> str:
    """A quantile's row in the ``stat`` table: ``0.5`` → ``'p50'``, ``0.999`` → ``'p99.9'``
    (q × 100 in the fewest exact digits)."""
    pct = format((Decimal(repr(q)) * 100).normalize(), "f")
    return f"p{pct}"


def quantile_of(stat: str) -> float:
    """Inverse of ``quantile_stat`` (exact: decimal arithmetic, then one rounding to float).
    ``RunFileError`` for a name ``quantile_stat`` never makes (a damaged file)."""
    try:
        q = Decimal(stat[1:]) / 100 if stat.startswith("p") else Decimal("nan")
    except InvalidOperation:
        q = Decimal("nan")
    if q.is_nan() or not 0 <= q <= 1:
        raise RunFileError(f"its stat table has a row {stat!r}, which is no quantile")
    return float(q)


META = Table(
    "streamscope_meta",
    "Identifies the file: key 'format' is 'streamscope-run', "
    f"'schema_version' is '{SCHEMA_VERSION}', "
    "'probe_core' the probe core that recorded the run ('native' or 'python'), 'cpus' the CPUs "
    "its processes could use.",
    (
        _C("key", "VARCHAR PRIMARY KEY", "format, schema_version, probe_core or cpus"),
        _C("value", "VARCHAR NOT NULL", "its value"),
    ),
)

RUN = Table(
    "run",
    "One row: the monitored execution. Written at start, updated when it ends.",
    (
        _C("run_id", "VARCHAR NOT NULL", "unique id of the run"),
        _C("name", "VARCHAR NOT NULL", "the run's name (given or derived from the app)"),
        _C("app", "VARCHAR NOT NULL", "the application that ran (script or module)"),
        _C("command", "VARCHAR NOT NULL", "the streamscope command line that started the run"),
        _C("argv", "VARCHAR[] NOT NULL", "the application's arguments"),
        _C("host", "VARCHAR NOT NULL", "host name of the monitor"),
        _C("pipeline", "VARCHAR NOT NULL", "name of the pipeline (topology)"),
        _C("started_unix_ns", "BIGINT NOT NULL", "wall-clock start, ns since the Unix epoch"),
        _C(
            "ended_unix_ns",
            "BIGINT",
            "wall-clock end, ns since the Unix epoch; NULL while running",
        ),
        _C("duration_ns", "BIGINT", "virtual-time length of the run in ns; NULL while running"),
        _C("frame_ns", "BIGINT NOT NULL", "default frame length in ns"),
        _C(
            "status",
            f"VARCHAR NOT NULL CHECK (status IN ({_STATUS_CHECK}))",
            "running (also: the writer died), completed, failed or interrupted",
        ),
        _C("error", "VARCHAR", "why the run failed or was interrupted; NULL otherwise"),
        _C(
            "streamscope_version",
            "VARCHAR NOT NULL",
            "version of streamscope that wrote the file",
        ),
        _C(
            "t0_host_ns",
            "BIGINT NOT NULL",
            "virtual time zero as a reading of the host's monotonic clock (ns)",
        ),
    ),
)

RESOURCE = Table(
    "resource",
    "Where stages run: threads, processes, devices, hosts.",
    (
        _C("name", "VARCHAR NOT NULL", "resource name"),
        _C("kind", "VARCHAR NOT NULL", "thread, process or a device kind"),
        _C("clock_domain", "VARCHAR NOT NULL", "the clock (timezone) its probes read"),
        _C("tick_period_ns", "DOUBLE NOT NULL", "nominal tick period of that clock in ns"),
    ),
)

STAGE = Table(
    "stage",
    "One compute block of the application.",
    (
        _C("name", "VARCHAR NOT NULL", "stage name"),
        _C("resource", "VARCHAR NOT NULL", "where it runs (resource.name)"),
        _C("role", "VARCHAR NOT NULL", "source (no inputs), sink (no outputs) or stage"),
        _C(
            "named_by",
            "VARCHAR NOT NULL",
            "a program's stage: how its name was found (given, function, target, place); "
            "empty for a pipeline's",
        ),
        _C("fanout", "VARCHAR NOT NULL", "with several outputs: roundrobin or broadcast"),
        _C("fanin", "VARCHAR NOT NULL", "with several inputs: roundrobin or zip"),
    ),
)

CHANNEL = Table(
    "channel",
    "A bounded FIFO between two stages.",
    (
        _C("name", "VARCHAR NOT NULL", "channel name, 'src -> dst' unless given"),
        _C("src", "VARCHAR NOT NULL", "stage at the tail (inserts items)"),
        _C("dst", "VARCHAR NOT NULL", "stage at the head (removes items)"),
        _C("capacity", "BIGINT NOT NULL", "capacity in items"),
        _C("transport", "VARCHAR NOT NULL", "how items cross: thread, process or link"),
        _C("bulk_size", "BIGINT NOT NULL", "link: items per bus transfer (0: not a link)"),
        _C("transfer_ns", "DOUBLE NOT NULL", "link: ns the bus is busy per transfer"),
        _C("latency_ns", "DOUBLE NOT NULL", "link: ns in flight after a transfer"),
        _C("timeout_ns", "DOUBLE", "link: flush after this long without an item; NULL: never"),
    ),
)

CHANNEL_END = Table(
    "channel_end",
    "A stage at an end of a channel besides its src and dst: another stage that puts into "
    "(a fan-in) or takes from (a fan-out) the same queue.",
    (
        _C("channel", "VARCHAR NOT NULL", "the channel (channel.name)"),
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C("side", "VARCHAR NOT NULL", "tail (the stage puts into the channel) or head (it takes)"),
    ),
)

PROBE = Table(
    "probe",
    "An active probe at a tap.",
    (
        _C("id", "INTEGER NOT NULL", "probe id (drops.probe_id)"),
        _C(
            "kind",
            "VARCHAR NOT NULL",
            "tail, head, send, deliver (channel ends); state, iteration, input_wait, "
            "output_wait, trace (stage); sampler, counter, timer (declared probes)",
        ),
        _C("target", "VARCHAR NOT NULL", "the channel, stage or STAGE.NAME it observes"),
        _C("domain", "VARCHAR NOT NULL", "clock domain of its timestamps"),
        _C(
            "storage",
            "VARCHAR NOT NULL",
            "samplers: centralized (shared buffer) or distributed; empty for others",
        ),
    ),
)

QUERY = Table(
    "query",
    "One performance query: measure METRIC of TARGETS, reduce with STATS, every FRAME.",
    (
        _C("id", "INTEGER NOT NULL", "query id"),
        _C("text", "VARCHAR NOT NULL", "the query as the user wrote it"),
        _C("metric", "VARCHAR NOT NULL", "what is measured: occupancy, throughput, state, ..."),
        _C("unit", "VARCHAR NOT NULL", "unit of the metric's values (items, items/s, ns, ...)"),
        _C("frame_ns", "BIGINT NOT NULL", "frame length in ns"),
        _C("targets", "VARCHAR[] NOT NULL", "channels or stages measured"),
        _C(
            "stats",
            "VARCHAR[] NOT NULL",
            "its aggregations in result order, e.g. [mean, max, quantiles, histogram, duty]",
        ),
    ),
)

FUNCTION = Table(
    "function",
    "A traced function (Pipeline.trace): its id in enter and exit records.",
    (
        _C("id", "INTEGER NOT NULL", "function id (record.value of enter/exit records)"),
        _C("name", "VARCHAR NOT NULL", "module:qualname"),
    ),
)

TABLES: tuple[Table, ...] = (
    META,
    RUN,
    RESOURCE,
    STAGE,
    CHANNEL,
    CHANNEL_END,
    PROBE,
    QUERY,
    FRAME,
    STAT,
    HISTOGRAM,
    DROPS,
    CALIBRATION,
    STALL,
    WORKER,
    FLIGHT,
    CLOCK_TRUTH,
    CLOCK_FIT,
    VQ_FRAME,
    VQ_LEVEL,
    FUNCTION,
    PROFILE,
    TRACE_EXCLUSION,
    OVERHEAD,
    RUNNER,
    SERVICE,
    STACKS,
    STACK_ID,
    STACK_SAMPLER,
    MACHINE,
    LINK,
    HOST,
    CORE,
    MONITOR,
    VIRTUAL_QUEUE,
    NOTE,
    ENDED,
    LEFTOVER,
    RECORD,
)
TABLE_NAMES = tuple(t.name for t in TABLES)


def ddl() -> list[str]:
    """Every statement that creates an empty run file's tables, in order."""
    return [stmt for t in TABLES for stmt in t.ddl()]


def schema_markdown() -> str:
    """The tables section of SCHEMA.md (a test keeps the file in step with ``TABLES``)."""
    parts: list[str] = []
    for t in TABLES:
        parts += [f"### `{t.name}`", "", t.doc, "", "| column | type | meaning |", "|---|---|---|"]
        parts += [f"| `{c.name}` | `{c.sql.split()[0]}` | {c.doc} |" for c in t.columns]
        parts.append("")
    return "\n".join(parts)
