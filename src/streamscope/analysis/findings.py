"""Automatic reading of a recorded run: the bottleneck, Little's law, and what went wrong.

In: a ``Run``. Out: ``findings(run)``, a list of ``Finding`` (most severe first), each with a
one-line title, a few sentences with the numbers, the numbers themselves and the frames they come
from (``evidence``), and what to do about it. Only what the run recorded is used; where a query
that would settle a question is missing, a finding says which to add instead of guessing.

The reading is a list of passes, run in order. A pass is a plain function of one ``Context`` (the
run, its series, stage breakdowns and channel summaries, read once, and the thresholds) that
returns its findings: ``def my_pass(ctx: Context) -> list[Finding]``. ``DEFAULT_PASSES`` holds
the shipped ones (run status, what the run said of itself, bottleneck, Little's law, stalls,
drops, causality violations, rejected queue models); to add one, pass
``passes=(*DEFAULT_PASSES, my_pass)`` to ``findings``.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamscope.analysis.bottleneck import bottleneck
from streamscope.analysis.context import (
    BUSY_THRESHOLD,
    LITTLES_TOLERANCE,
    MOSTLY,
    SEVERITIES,
    Context,
    Finding,
    FindingsPass,
)
from streamscope.analysis.health import (
    drops,
    notes,
    run_status,
    stalls,
    violations,
    virtual_queues,
)
from streamscope.analysis.littles_law import littles_law
from streamscope.store.reader import Run

__all__ = ["DEFAULT_PASSES", "Context", "Finding", "FindingsPass", "findings"]

#: The passes ``findings`` runs unless told otherwise, in the order their findings are listed
#: within one severity.
DEFAULT_PASSES: tuple[FindingsPass, ...] = (
    run_status,
    notes,
    bottleneck,
    littles_law,
    stalls,
    drops,
    violations,
    virtual_queues,
)


def findings(
    run: Run,
    *,
    busy_threshold: float = BUSY_THRESHOLD,
    mostly: float = MOSTLY,
    littles_tolerance: float = LITTLES_TOLERANCE,
    passes: Sequence[FindingsPass] = DEFAULT_PASSES,
) -> list[Finding]:
    """Everything ``run`` shows, most severe first (problem, warning, info; stable otherwise).

    ``busy_threshold``: the busy fraction that makes a stage rate-limiting; ``mostly``: the
    fraction of time that makes a channel "mostly" full or empty; ``littles_tolerance``: how far
    L / (λ·W) may stray from 1 before the Little's law check warns. ``passes``: the passes to
    run, in order (see the module docstring).
    """
    ctx = Context.of(
        run, busy_threshold=busy_threshold, mostly=mostly, littles_tolerance=littles_tolerance
    )
    out = [f for p in passes for f in p(ctx)]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: rank.get(f.severity, len(rank)))
