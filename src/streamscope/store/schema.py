"""The run file's tables: one documented ``Table`` per table, rendered to DDL and to markdown.

Column documentation is stored in the file too (``COMMENT ON``), so ``duckdb_columns()`` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT = "streamscope-run"
SCHEMA_VERSION = 7
STATUSES = ("running", "completed", "failed", "interrupted")
UNDER_BIN = -1
OVER_BIN = -2


@dataclass(frozen=True, slots=True)
class Column:
    """One column: ``sql`` is its DuckDB type (with constraints), ``doc`` one line for users."""

    name: str
    sql: str
    doc: str


@dataclass(frozen=True, slots=True)
class Table:
    """One table of a run file, with what one row means."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> list[str]:
        """CREATE TABLE followed by one COMMENT ON per column."""
        cols = ",\n  ".join(f"{c.name} {c.sql}" for c in self.columns)
        out = [f"CREATE TABLE {self.name} (\n  {cols}\n)", _comment("TABLE", self.name, self.doc)]
        out += [_comment("COLUMN", f"{self.name}.{c.name}", c.doc) for c in self.columns]
        return out


def _comment(kind: str, what: str, doc: str) -> str:
    return f"COMMENT ON {kind} {what} IS '{doc.replace(chr(39), chr(39) * 2)}'"


_C = Column
_QTF = (
    _C("query_id", "INTEGER NOT NULL", "the query (query.id)"),
    _C("target", "VARCHAR NOT NULL", "the channel or stage name the query measured"),
    _C("frame", "BIGINT NOT NULL", "frame number, 0 at the run's start (frame.frame)"),
)
_STATUS_CHECK = ", ".join(f"'{s}'" for s in STATUSES)

TABLES: tuple[Table, ...] = (
    Table(
        "streamscope_meta",
        "Identifies the file: key 'format' is 'streamscope-run', "
        f"'schema_version' is '{SCHEMA_VERSION}', "
        "'probe_core' the probe core that recorded the run ('native' or 'python').",
        (
            _C("key", "VARCHAR PRIMARY KEY", "format, schema_version or probe_core"),
            _C("value", "VARCHAR NOT NULL", "its value"),
        ),
    ),
    Table(
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
    ),
    Table(
        "resource",
        "Where stages run: threads, processes, devices, hosts.",
        (
            _C("name", "VARCHAR NOT NULL", "resource name"),
            _C("kind", "VARCHAR NOT NULL", "thread, process or a device kind"),
            _C("clock_domain", "VARCHAR NOT NULL", "the clock (timezone) its probes read"),
            _C("tick_period_ns", "DOUBLE NOT NULL", "nominal tick period of that clock in ns"),
        ),
    ),
    Table(
        "stage",
        "One compute block of the application.",
        (
            _C("name", "VARCHAR NOT NULL", "stage name"),
            _C("resource", "VARCHAR NOT NULL", "where it runs (resource.name)"),
            _C("role", "VARCHAR NOT NULL", "source (no inputs), sink (no outputs) or stage"),
        ),
    ),
    Table(
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
    ),
    Table(
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
    ),
    Table(
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
    ),
    Table(
        "frame",
        "One frame of one query for one target: the time it covers.",
        (
            *_QTF,
            _C("t_start_ns", "BIGINT NOT NULL", "frame start, virtual ns since the run's start"),
            _C(
                "t_end_ns",
                "BIGINT NOT NULL",
                "frame end (exclusive), virtual ns since the run's start",
            ),
            _C("covered_ns", "BIGINT NOT NULL", "ns of the frame that were observed"),
        ),
    ),
    Table(
        "stat",
        "Numbers of one frame: a row per scalar (mean, max...), per quantile (p50, p99.9) and "
        "per duty state (duty.busy).",
        (
            *_QTF,
            _C(
                "point",
                "VARCHAR NOT NULL",
                "the aggregation that produced the row: mean, quantiles, duty, ...",
            ),
            _C("stat", "VARCHAR NOT NULL", "the number: mean, max, p50, p99.9, duty.busy, ..."),
            _C(
                "value",
                "DOUBLE",
                "the value (duty: a fraction of time); NULL when the frame had no data (or NaN)",
            ),
        ),
    ),
    Table(
        "histogram",
        "Histogram bins of one frame: bins 0..n-1 cover [lo, hi); bin -1 is below the first "
        "edge (lo NULL), bin -2 above the last (hi NULL).",
        (
            *_QTF,
            _C("point", "VARCHAR NOT NULL", "the aggregation that produced the row (histogram)"),
            _C("bin", "INTEGER NOT NULL", "bin index; -1 under, -2 over"),
            _C("lo", "DOUBLE", "lower edge (inclusive); NULL for bin -1"),
            _C("hi", "DOUBLE", "upper edge (exclusive); NULL for bin -2"),
            _C("weight", "DOUBLE", "count for event metrics, ns for time-weighted ones; NULL: NaN"),
        ),
    ),
    Table(
        "drops",
        "Records each probe refused and kept, per frame.",
        (
            _C("probe_id", "INTEGER NOT NULL", "the probe (probe.id)"),
            _C("frame", "BIGINT NOT NULL", "frame number"),
            _C("dropped", "BIGINT NOT NULL", "records lost (buffer full)"),
            _C("recorded", "BIGINT NOT NULL", "records kept"),
        ),
    ),
    Table(
        "calibration",
        "Round trips between the host and a clock domain (one row per exchange), every burst.",
        (
            _C("domain", "VARCHAR NOT NULL", "the clock domain (resource.clock_domain)"),
            _C("burst", "INTEGER NOT NULL", "burst number in the run, from 0"),
            _C("t1_ns", "BIGINT NOT NULL", "host monotonic ns just before the request"),
            _C("t2_ticks", "BIGINT NOT NULL", "the domain's counter in the reply"),
            _C("t3_ns", "BIGINT NOT NULL", "host monotonic ns just after the reply"),
        ),
    ),
    Table(
        "stall",
        "Stages busy for longer than the run's stall limit without finishing anything (no "
        "state change): hung, or one item takes that long.",
        (
            _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
            _C("start_ns", "BIGINT NOT NULL", "virtual ns of its last state change before"),
            _C("end_ns", "BIGINT NOT NULL", "virtual ns it went on (or the run ended)"),
            _C(
                "ongoing",
                "BOOLEAN NOT NULL",
                "never went on (still busy at the end, or stopped so)",
            ),
        ),
    ),
    Table(
        "worker",
        "Each worker of each stage (a thread, process or task with a state probe of its own), "
        "its time in each state over the run: the per-worker breakdown of a stage worked in by "
        "several.",
        (
            _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
            _C("probe_id", "INTEGER NOT NULL", "the worker's state probe (probe.id)"),
            _C("resource", "VARCHAR NOT NULL", "where it ran (resource.name)"),
            _C("idle_ns", "BIGINT NOT NULL", "ns idle"),
            _C("busy_ns", "BIGINT NOT NULL", "ns busy"),
            _C("blocked_in_ns", "BIGINT NOT NULL", "ns waiting for an input"),
            _C("blocked_out_ns", "BIGINT NOT NULL", "ns waiting for room in an output"),
            _C("unknown_ns", "BIGINT NOT NULL", "ns unknown (records refused, or gone)"),
        ),
    ),
    Table(
        "flight",
        "The flight recorder: the latest raw records of host stages and channels, kept in "
        "`record` at the end of a run without --trace so exports show its last stretch.",
        (
            _C("capacity", "BIGINT NOT NULL", "records it keeps at most (--flight-records)"),
            _C("kept", "BIGINT NOT NULL", "records it kept (in the record table)"),
            _C("overwritten", "BIGINT NOT NULL", "older records it let go"),
        ),
    ),
    Table(
        "clock_truth",
        "Validation runs (--ground-truth) only: each emulated clock as it really was, read by "
        "nothing that estimates, for checking cross-clock figures and their bounds.",
        (
            _C("domain", "VARCHAR NOT NULL", "the clock domain"),
            _C("spec", "VARCHAR NOT NULL", "the emulated clock (rate, offset, drift, steps)"),
            _C("epoch_host_ns", "BIGINT NOT NULL", "host monotonic ns at which it counted from"),
        ),
    ),
    Table(
        "clock_fit",
        "One burst's fitted map host_ns = s * (ticks - x0) + b, with its hard bound width.",
        (
            _C("domain", "VARCHAR NOT NULL", "the clock domain"),
            _C("burst", "INTEGER NOT NULL", "burst number"),
            _C("method", "VARCHAR NOT NULL", "hull (robust default) or timetrial (seed 000)"),
            _C("x0_ticks", "BIGINT NOT NULL", "reference tick of the fit (the burst's centre)"),
            _C("s_ns_per_tick", "DOUBLE NOT NULL", "fitted host ns per tick"),
            _C("b_ns", "DOUBLE NOT NULL", "fitted host monotonic ns at x0"),
            _C("feasible", "BOOLEAN NOT NULL", "false: no line satisfies the burst (clock step?)"),
            _C("n", "INTEGER NOT NULL", "exchanges in the burst"),
            _C("rtt_min_ns", "BIGINT NOT NULL", "fastest round trip"),
            _C("bound_width_ns", "DOUBLE NOT NULL", "width of the hard bounds at x0"),
            _C("residual_rms_ns", "DOUBLE NOT NULL", "rms residual of the midpoints"),
        ),
    ),
    Table(
        "vq_frame",
        "A virtual queue (a link channel's occupancy, estimated by simulation) per frame: the "
        "model's self-check against the two visible sub-queues, and, in validation runs, its "
        "distance to the ground truth.",
        (
            *_QTF,
            _C("model", "VARCHAR NOT NULL", "tandem (bulk-transfer bus) or ideal"),
            _C(
                "arrivals",
                "VARCHAR",
                "how the model drew the insertions: profile (the measured insertions per "
                "sub-window, spaced by gaps from the histogram) or renewal (i.i.d. gaps from the "
                "histogram, seed 002); NULL: not modelled",
            ),
            _C("verdict", "VARCHAR", "consistent or rejected; NULL: not enough data to model"),
            _C("w1_items", "DOUBLE", "W1 (items) of the sub-queues, measured vs predicted"),
            _C("tv", "DOUBLE", "larger total variation of the two sub-queues"),
            _C("threshold_items", "DOUBLE", "null quantile + clock bias: reject above"),
            _C("null_quantile_items", "DOUBLE", "(1 - alpha) quantile of model-vs-model W1"),
            _C("clock_bias_items", "DOUBLE", "throughput x timing uncertainty, in items"),
            _C("predicted_mean", "DOUBLE", "predicted mean occupancy of the whole queue"),
            _C("ideal_mean", "DOUBLE", "the same from the ideal-queue model"),
            _C("tail_mean", "DOUBLE", "measured mean occupancy of the tail buffer"),
            _C("head_mean", "DOUBLE", "measured mean occupancy of the head buffer"),
            _C("items_in", "BIGINT NOT NULL", "items inserted at the tail in the frame"),
            _C("items_out", "BIGINT NOT NULL", "items removed at the head in the frame"),
            _C("truth_mean", "DOUBLE", "true mean occupancy (--ground-truth runs; else NULL)"),
            _C("w1_truth_items", "DOUBLE", "W1 (items) predicted vs true occupancy"),
            _C("w1_truth_ideal_items", "DOUBLE", "W1 (items) ideal-model vs true occupancy"),
            _C(
                "renewal_verdict",
                "VARCHAR",
                "self-check of the renewal model (i.i.d. gaps), with its dependence test where "
                "the profile was measured; NULL: not checked",
            ),
            _C(
                "dependence_p",
                "DOUBLE",
                "p-value of the test that the insertions are a renewal process (small: they "
                "are not i.i.d.); NULL: no profile",
            ),
            _C("renewal_mean", "DOUBLE", "predicted mean occupancy of the renewal model"),
            _C("w1_truth_renewal_items", "DOUBLE", "W1 (items) renewal-model vs true occupancy"),
        ),
    ),
    Table(
        "vq_level",
        "Level distributions of a virtual queue per frame: fraction of the frame at each level.",
        (
            *_QTF,
            _C(
                "series",
                "VARCHAR NOT NULL",
                "predicted (whole queue, tandem), ideal, renewal (tandem with i.i.d. gaps, "
                "where the profile was used), tail/head (measured buffers), "
                "tail_predicted/head_predicted, truth",
            ),
            _C("level", "INTEGER NOT NULL", "items in the queue"),
            _C("fraction", "DOUBLE NOT NULL", "fraction of the frame's time at that level"),
        ),
    ),
    Table(
        "function",
        "A traced function (Pipeline.trace): its id in enter and exit records.",
        (
            _C("id", "INTEGER NOT NULL", "function id (record.value of enter/exit records)"),
            _C("name", "VARCHAR NOT NULL", "module:qualname"),
        ),
    ),
    Table(
        "profile",
        "Per stage and traced function, over the run: calls and time, from enter/exit events.",
        (
            _C("stage", "VARCHAR NOT NULL", "the stage whose thread made the calls"),
            _C("function_id", "INTEGER NOT NULL", "the function (function.id)"),
            _C("calls", "BIGINT NOT NULL", "calls that returned (or were open at the end)"),
            _C("total_ns", "DOUBLE NOT NULL", "time inside the function, callees included"),
            _C("self_ns", "DOUBLE NOT NULL", "time inside the function, callees excluded"),
            _C("max_ns", "DOUBLE NOT NULL", "the longest call"),
        ),
    ),
    Table(
        "trace_exclusion",
        "Functions left out of tracing: by name pattern, or during the run for being called "
        "more often than the limit.",
        (
            _C("name", "VARCHAR NOT NULL", "module:qualname"),
            _C("reason", "VARCHAR NOT NULL", "the pattern, or the call rate and the limit"),
        ),
    ),
    Table(
        "overhead",
        "The monitoring's own cost, per probe over the run: events it handled (kept or "
        "refused) and the time they took: one event in 1024 is timed by the probe core while "
        "the run goes on, plus, for probes that Python code calls, what that call adds (timed "
        "by the monitor).",
        (
            _C("probe_id", "INTEGER NOT NULL", "the probe (probe.id)"),
            _C("events", "BIGINT NOT NULL", "records kept plus records refused"),
            _C("est_probe_ns", "DOUBLE NOT NULL", "estimated ns spent in the probe"),
            _C("ns_per_event", "DOUBLE NOT NULL", "the cost of one event"),
            _C("measured", "VARCHAR NOT NULL", "how ns_per_event was obtained"),
        ),
    ),
    Table(
        "runner",
        "Where each stage thread's CPU time went, measured while it ran (pipelines run by "
        "streamscope): its own code on one item in 256, the rest is the runner's loop, the "
        "channels and the probes.",
        (
            _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
            _C("items", "BIGINT NOT NULL", "items the stage took (a source: made)"),
            _C("samples", "BIGINT NOT NULL", "items whose own-code CPU time was measured"),
            _C("user_ns", "BIGINT NOT NULL", "CPU ns in the stage's own code over the samples"),
            _C("cpu_ns", "BIGINT NOT NULL", "the stage thread's CPU ns from its start to its end"),
        ),
    ),
    Table(
        "monitor",
        "The monitor's own figures per frame of the run: how far behind the application it was "
        "and what it spent (it runs in a process of its own).",
        (
            _C("frame", "BIGINT NOT NULL", "frame number (of the run's default frame)"),
            _C(
                "lag_ns",
                "BIGINT NOT NULL",
                "the most, over the frame, by which the reduced timeline trailed real time",
            ),
            _C("records", "BIGINT NOT NULL", "records drained from the rings in the frame"),
            _C("cpu_ns", "BIGINT NOT NULL", "the monitor process's CPU time in the frame"),
            _C("drains", "BIGINT NOT NULL", "drain cycles in the frame"),
        ),
    ),
    Table(
        "virtual_queue",
        "A virtual queue over the whole run: the frames' verdicts combined (binomial test).",
        (
            _C("query_id", "INTEGER NOT NULL", "the query (query.id)"),
            _C("target", "VARCHAR NOT NULL", "the link channel"),
            _C("model", "VARCHAR NOT NULL", "tandem or ideal"),
            _C("verdict", "VARCHAR NOT NULL", "consistent or rejected"),
            _C("frames", "BIGINT NOT NULL", "frames with a verdict"),
            _C("frames_rejected", "BIGINT NOT NULL", "frames rejected"),
            _C("alpha", "DOUBLE NOT NULL", "level of each frame's test and of the run's"),
            _C("p_value", "DOUBLE NOT NULL", "P(Binomial(frames, alpha) >= frames_rejected)"),
            _C("w1_items", "DOUBLE", "mean over frames of the self-check W1"),
            _C("w1_truth_items", "DOUBLE", "mean over frames of W1 to the truth; NULL: none"),
            _C("w1_truth_ideal_items", "DOUBLE", "the same for the ideal-queue model"),
            _C(
                "renewal_verdict",
                "VARCHAR",
                "the renewal model's frames combined, and their dependence tests pooled (each "
                "at alpha/2); NULL: no frame checked",
            ),
            _C("dependence_p", "DOUBLE", "p-value of the pooled dependence test; NULL: none"),
            _C("w1_truth_renewal_items", "DOUBLE", "the same for the renewal model"),
        ),
    ),
    Table(
        "record",
        "Raw probe records of calibrated clock domains (and channels crossing into them), in "
        "the domain's own ticks, kept so `streamscope retime` can convert them again; the "
        "flight recorder's latest records of the others (see `flight`); with --trace, every "
        "probe's records.",
        (
            _C("probe_id", "INTEGER NOT NULL", "the probe (probe.id)"),
            _C(
                "kind",
                "INTEGER NOT NULL",
                "1 put, 2 get, 3 state, 4 dropped, 5 count, 6 sample, 7 enter, 8 exit, 9 duration",
            ),
            _C("ticks", "BIGINT NOT NULL", "raw clock reading in the probe's domain"),
            _C(
                "value",
                "BIGINT NOT NULL",
                "sequence number, state code, count total, sample, function id or duration ticks",
            ),
        ),
    ),
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
