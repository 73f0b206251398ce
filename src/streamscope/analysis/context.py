"""What a findings pass reads and what it returns: one ``Context`` in, ``Finding``s out.

In: a ``Run`` and the thresholds of ``findings()``. Out: ``Context.of(run, ...)``, built once per
call (the run's series, stage breakdowns and channel summaries read once), and the ``Finding``
value every pass returns. ``FindingsPass`` is the signature a pass has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamscope.analysis.breakdown import (
    ChannelSummary,
    StageBreakdown,
    channel_summary,
    stage_breakdown,
)
from streamscope.analysis.jsonable import plain
from streamscope.analysis.series import Series, collect
from streamscope.store.reader import Run

SEVERITIES = ("problem", "warning", "info")
#: The busy fraction that makes a stage rate-limiting.
BUSY_THRESHOLD = 0.8
#: The fraction of time that makes a channel "mostly" full or empty.
MOSTLY = 0.5
#: How far L / (λ·W) may stray from 1 before the Little's law check warns.
LITTLES_TOLERANCE = 0.2


#: The severities, most pressing first (findings are ranked by it).
SEVERITY_ORDER = {"problem": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One conclusion about a run.

    ``kind``: ``bottleneck``, ``no_bottleneck``, ``backpressure``, ``missing_queries``,
    ``littles_law``, ``stall``, ``drops``, ``violations``, ``virtual_queue``, ``failed_run``,
    ``unfinished_run``, ``nothing_seen``, ``outlived``. ``severity``: ``problem``, ``warning``
    or ``info``. ``target``: the stage
    (or group of replicas, ``walk0–walk7``, its members in ``evidence["members"]``) or channel
    (or probe target) it is about, ``""`` for the whole run. ``evidence``: the numbers
    (fractions in 0..1, times in ns) and the frames they come from, as ``[first, last]`` ranges.
    """

    kind: str
    severity: str
    target: str
    title: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict, hash=False)
    suggestion: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A ``json.dumps``-able dict (``NaN`` becomes ``None``)."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "target": self.target,
            "title": self.title,
            "detail": self.detail,
            "evidence": plain(self.evidence),
            "suggestion": self.suggestion,
        }


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a findings pass reads: the run, what was read from it once, and the thresholds.

    ``series``: ``collect(run)``; ``stages``/``channels``: its stage breakdowns and channel
    summaries, in topology order. ``busy_threshold``, ``mostly`` and ``littles_tolerance``: as
    ``findings()`` documents them.
    """

    run: Run
    series: tuple[Series, ...]
    stages: tuple[StageBreakdown, ...]
    channels: tuple[ChannelSummary, ...]
    busy_threshold: float = BUSY_THRESHOLD
    mostly: float = MOSTLY
    littles_tolerance: float = LITTLES_TOLERANCE

    @classmethod
    def of(
        cls,
        run: Run,
        *,
        busy_threshold: float = BUSY_THRESHOLD,
        mostly: float = MOSTLY,
        littles_tolerance: float = LITTLES_TOLERANCE,
    ) -> Context:
        """The context of ``run``: its results read once, into series, stages and channels."""
        series = tuple(collect(run))
        return cls(
            run,
            series,
            tuple(stage_breakdown(run, series=series)),
            tuple(channel_summary(run, series=series)),
            busy_threshold,
            mostly,
            littles_tolerance,
        )


#: A findings pass: what it finds in the context, in the order it wants them reported.
FindingsPass = Callable[[Context], list[Finding]]
