"""The run file's results tables: what the queries measured, frame by frame, and the virtual
queues' estimates with their self-checks.

In: nothing (declarations). Out: one ``Table`` per results table, for ``schema.TABLES``.
"""

from __future__ import annotations

from streamscope.store.table import KEY_COLUMNS, Column, Table

_C = Column

FRAME = Table(
    "frame",
    "One frame of one query for one target: the time it covers.",
    (
        *KEY_COLUMNS,
        _C("t_start_ns", "BIGINT NOT NULL", "frame start, virtual ns since the run's start"),
        _C(
            "t_end_ns",
            "BIGINT NOT NULL",
            "frame end (exclusive), virtual ns since the run's start",
        ),
        _C("covered_ns", "BIGINT NOT NULL", "ns of the frame that were observed"),
    ),
)

STAT = Table(
    "stat",
    "Numbers of one frame: a row per scalar (mean, max...), per quantile (p50, p99.9) and "
    "per duty state (duty.busy).",
    (
        *KEY_COLUMNS,
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
)

HISTOGRAM = Table(
    "histogram",
    "Histogram bins of one frame: bins 0..n-1 cover [lo, hi); bin -1 is below the first "
    "edge (lo NULL), bin -2 above the last (hi NULL).",
    (
        *KEY_COLUMNS,
        _C("point", "VARCHAR NOT NULL", "the aggregation that produced the row (histogram)"),
        _C("bin", "INTEGER NOT NULL", "bin index; -1 under, -2 over"),
        _C("lo", "DOUBLE", "lower edge (inclusive); NULL for bin -1"),
        _C("hi", "DOUBLE", "upper edge (exclusive); NULL for bin -2"),
        _C("weight", "DOUBLE", "count for event metrics, ns for time-weighted ones; NULL: NaN"),
    ),
)

DROPS = Table(
    "drops",
    "Records each probe refused and kept, per frame.",
    (
        _C("probe_id", "INTEGER NOT NULL", "the probe (probe.id)"),
        _C("frame", "BIGINT NOT NULL", "frame number"),
        _C("dropped", "BIGINT NOT NULL", "records lost (buffer full)"),
        _C("recorded", "BIGINT NOT NULL", "records kept"),
    ),
)

VQ_FRAME = Table(
    "vq_frame",
    "A virtual queue (a link channel's occupancy, estimated by simulation) per frame: the "
    "model's self-check against the two visible sub-queues, and, in validation runs, its "
    "distance to the ground truth.",
    (
        *KEY_COLUMNS,
        _C("model", "VARCHAR NOT NULL", "tandem (bulk-transfer bus) or ideal"),
        _C(
            "arrivals",
            "VARCHAR",
            "how the model drew the insertions: profile (the measured insertions per "
            "sub-window, spaced by gaps from the histogram) or renewal (i.i.d. gaps from the "
            "histogram, Lancaster et al. 2011); NULL: not modelled",
        ),
        _C(
            "verdict",
            "VARCHAR",
            "consistent or rejected (W1 over threshold_items and, less the clock bias, over "
            "tolerance_items; or the renewal model's dependence test); NULL: not enough data "
            "to model",
        ),
        _C("w1_items", "DOUBLE", "W1 (items) of the sub-queues, measured vs predicted"),
        _C("tv", "DOUBLE", "larger total variation of the two sub-queues"),
        _C(
            "threshold_items",
            "DOUBLE",
            "null quantile + clock bias: above it the buffers tell the model from the link",
        ),
        _C("null_quantile_items", "DOUBLE", "(1 - alpha) quantile of model-vs-model W1"),
        _C("clock_bias_items", "DOUBLE", "throughput x timing uncertainty, in items"),
        _C(
            "decided_by",
            "VARCHAR",
            "what decided the verdict: chance (W1 within the null quantile), clock (within it "
            "plus the clock bias), tolerance (beyond both, within the tolerance plus the clock "
            "bias), discrepancy (beyond that too: rejected), dependence (the renewal model's gaps are not "
            "i.i.d.: rejected), unbounded (no verdict: no clock burst pinned the device's clock "
            "over the frame)",
        ),
        _C("excess_items", "DOUBLE", "W1 beyond the threshold: the discrepancy that is no chance"),
        _C(
            "tolerance_items",
            "DOUBLE",
            "how far the estimate may be off: the run's tolerance share of predicted_mean, at "
            "least 1 item",
        ),
        _C(
            "band_items",
            "DOUBLE",
            "predicted_mean +- this is what the self-check cannot rule out: max(W1, null "
            "quantile) + clock bias",
        ),
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
)

VQ_LEVEL = Table(
    "vq_level",
    "Level distributions of a virtual queue per frame: fraction of the frame at each level.",
    (
        *KEY_COLUMNS,
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
)

VIRTUAL_QUEUE = Table(
    "virtual_queue",
    "A virtual queue over the whole run: the frames' verdicts combined (binomial test).",
    (
        _C("query_id", "INTEGER NOT NULL", "the query (query.id)"),
        _C("target", "VARCHAR NOT NULL", "the link channel"),
        _C("model", "VARCHAR NOT NULL", "tandem or ideal"),
        _C("verdict", "VARCHAR NOT NULL", "consistent or rejected"),
        _C("frames", "BIGINT NOT NULL", "frames with a verdict"),
        _C("frames_rejected", "BIGINT NOT NULL", "frames rejected"),
        _C(
            "frames_distinguishable",
            "BIGINT",
            "frames whose buffers told the model from the link (W1 over threshold), rejected "
            "or not",
        ),
        _C("tolerance", "DOUBLE", "the run's tolerance, a share of each frame's estimate"),
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
)

__all__ = ["DROPS", "FRAME", "HISTOGRAM", "STAT", "VIRTUAL_QUEUE", "VQ_FRAME", "VQ_LEVEL"]
