"""The run file's clock tables: round trips to each clock domain, the fits made of them, the
emulated clocks' truth, and the raw records kept to convert again.

In: nothing (declarations). Out: one ``Table`` per clock table, for ``schema.TABLES``.
"""

from __future__ import annotations

from streamscope.store.table import Column, Table

_C = Column

CALIBRATION = Table(
    "calibration",
    "Round trips between the host and a clock domain (one row per exchange), every burst.",
    (
        _C("domain", "VARCHAR NOT NULL", "the clock domain (resource.clock_domain)"),
        _C("burst", "INTEGER NOT NULL", "burst number in the run, from 0"),
        _C("t1_ns", "BIGINT NOT NULL", "host monotonic ns just before the request"),
        _C("t2_ticks", "BIGINT NOT NULL", "the domain's counter in the reply"),
        _C("t3_ns", "BIGINT NOT NULL", "host monotonic ns just after the reply"),
    ),
)

CLOCK_TRUTH = Table(
    "clock_truth",
    "Validation runs (--ground-truth) only: each emulated clock as it really was, read by "
    "nothing that estimates, for checking cross-clock figures and their bounds.",
    (
        _C("domain", "VARCHAR NOT NULL", "the clock domain"),
        _C("spec", "VARCHAR NOT NULL", "the emulated clock (rate, offset, drift, steps)"),
        _C("epoch_host_ns", "BIGINT NOT NULL", "host monotonic ns at which it counted from"),
    ),
)

CLOCK_FIT = Table(
    "clock_fit",
    "One burst's fitted map host_ns = s * (ticks - x0) + b, with its hard bound width.",
    (
        _C("domain", "VARCHAR NOT NULL", "the clock domain"),
        _C("burst", "INTEGER NOT NULL", "burst number"),
        _C(
            "method",
            "VARCHAR NOT NULL",
            "hull (robust default) or timetrial (Lancaster & Chamberlain 2010)",
        ),
        _C("x0_ticks", "BIGINT NOT NULL", "reference tick of the fit (the burst's centre)"),
        _C("s_ns_per_tick", "DOUBLE NOT NULL", "fitted host ns per tick"),
        _C("b_ns", "DOUBLE NOT NULL", "fitted host monotonic ns at x0"),
        _C("feasible", "BOOLEAN NOT NULL", "false: no line satisfies the burst (clock step?)"),
        _C("n", "INTEGER NOT NULL", "exchanges in the burst"),
        _C("rtt_min_ns", "BIGINT NOT NULL", "fastest round trip"),
        _C("bound_width_ns", "DOUBLE NOT NULL", "width of the hard bounds at x0"),
        _C("residual_rms_ns", "DOUBLE NOT NULL", "rms residual of the midpoints"),
    ),
)

FLIGHT = Table(
    "flight",
    "The flight recorder: the latest raw records of host stages and channels, kept in "
    "`record` at the end of a run without --trace so exports show its last stretch.",
    (
        _C("capacity", "BIGINT NOT NULL", "records it keeps at most (--flight-records)"),
        _C("kept", "BIGINT NOT NULL", "records it kept (in the record table)"),
        _C("overwritten", "BIGINT NOT NULL", "older records it let go"),
    ),
)

RECORD = Table(
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
)

__all__ = ["CALIBRATION", "CLOCK_FIT", "CLOCK_TRUTH", "FLIGHT", "RECORD"]
