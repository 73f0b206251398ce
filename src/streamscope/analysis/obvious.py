"""The obvious changes' predictions for a run, as the pages and the terminal quote them.

In: a ``Run`` and its findings. Out: ``predictions(run, found)``, a ``Predictions``: the model's
self-check in a sentence, a ``WhatIf`` per obvious change (``Predictor.obvious``: each
bottleneck's replicas and speed doubled, each mostly full channel's capacity doubled), or why
nothing is predicted; ``quote(unit)``, the sentence a bottleneck finding carries,
``advice(finding)``, what to do about it in the light of the predictions (more threads of a stage
bound by its interpreter lock gain nothing), and ``to_dict()``, the ``whatif`` of ``show --json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamscope.analysis.context import Finding
    from streamscope.store.reader import Run


class Predictions:
    """The what-if predictions of a page: ``rows`` (a ``WhatIf`` per obvious change), ``check``
    (the self-check, a sentence), ``why_not`` (why nothing is predicted; ``no_model``: the run
    has nothing to model), ``assumed``, and ``quote``: the sentence the bottleneck finding
    carries."""

    def __init__(self, rows: Sequence[Any] = (), check: str = "", why_not: str = "",
                 no_model: bool = False, assumed: Sequence[str] = ()) -> None:  # fmt: skip
        self.rows, self.check, self.why_not = list(rows), check, why_not
        self.no_model, self.assumed = no_model, list(assumed)

    def row(self, target: str) -> Any:
        """The first prediction for the unit ``target`` names (a ``WhatIf``; None for none)."""
        for w in self.rows:
            if w.predicted is not None and any(_names(c.target, target) for c in w.changes):
                return w
        return None

    def quote(self, target: str) -> str:
        """The first prediction for the unit ``target`` names, in a sentence ("" for none)."""
        w = self.row(target)
        return "" if w is None else str(w.sentence)

    def advice(self, f: Finding) -> str:
        """What to do about ``f``: its suggestion, but for a bottleneck whose replicas the
        model predicts to gain next to nothing (under ``LOCK_GAIN``) because they share their
        process's interpreter lock: then that more threads will not help, and what would."""
        w = self.row(f.target) if f.kind == "bottleneck" else None
        if w is None or not any(c.attr == "replicas" for c in w.changes):
            return f.suggestion
        if (w.gain or 0.0) >= LOCK_GAIN or "interpreter lock" not in w.predicted.limit:
            return f.suggestion
        how = ("a multiprocessing.Pool or a ProcessPoolExecutor running it" if w.measured.program
               else "resource=ss.Process(...)")  # fmt: skip
        return (
            f"more threads will not help {f.target}: they would share the interpreter lock its "
            f"code holds while it computes (what if: {w.sentence.rstrip('.')}); run it in "
            f"processes of its own ({how}), or move its work to code that releases the lock"
        )

    def to_dict(self) -> dict[str, Any]:
        """A ``json.dumps``-able dict: ``check`` and ``why_not`` (sentences, "" for none),
        ``predictions`` (each obvious change's, as ``whatif --json`` gives one) and
        ``assumed``."""
        return {
            "check": self.check,
            "why_not": self.why_not,
            "predictions": [w.to_dict() for w in self.rows],
            "assumed": list(self.assumed),
        }


#: A bottleneck's replicas doubled gaining less than this, the interpreter lock then what limits
#: the rate: more threads will not help it (``Predictions.advice``).
LOCK_GAIN = 0.10


def _names(pattern: str, label: str) -> bool:
    """Whether a change's target (``walk*``, ``avg``) is the unit a finding names."""
    stem = pattern.rstrip("*")
    return label == pattern or (pattern.endswith("*") and label.startswith(stem))


def predictions(run: Run, found: Sequence[Finding]) -> Predictions:
    """The obvious changes' predictions for ``run`` (simulated: seconds for a large pipeline),
    or why there are none."""
    from streamscope.analysis.whatif import Predictor, WhatIfError

    try:
        p = Predictor(run)
    except WhatIfError as e:
        no_model = "no service times" in str(e) or "no stages" in str(e)
        return Predictions(why_not=str(e), no_model=no_model)
    c = p.check
    if c.verdict != "consistent":
        return Predictions(
            why_not=f"The model of this {'program' if p.model.program else 'pipeline'} does not "
            "reproduce the run, so it predicts "
            "nothing: " + "; ".join(c.misses) + ".",
            assumed=p.model.assumed,
        )
    what = "program" if p.model.program else "pipeline"
    check = (f"The {what}'s model reproduces this run: throughput {c.throughput_error:+.1%} "
             f"of the measured {p.model.throughput:,.1f}/s (within {c.allowed:.0%}), every "
             "stage's busy share and channel's occupancy within their tolerances.")  # fmt: skip
    try:
        rows = p.obvious(run, found)
    except WhatIfError as e:
        return Predictions(check=check, why_not=str(e), assumed=p.model.assumed)
    return Predictions(rows, check, assumed=p.model.assumed)
