"""Predictions: the unchanged model's replications and self-check, each change simulated
against the same random numbers (``Predictor``, ``whatif``), and what then limits the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streamscope.analysis.breakdown import channel_summary
from streamscope.analysis.context import BUSY_THRESHOLD
from streamscope.analysis.groups import range_label, stage_groups
from streamscope.analysis.whatif.changes import apply_changes
from streamscope.analysis.whatif.functions import resolve
from streamscope.analysis.whatif.kinds import (
    OCCUPANCY_TOLERANCE,
    REPLICATIONS,
    STATE_TOLERANCE,
    THROUGHPUT_TOLERANCE,
    Change,
    Check,
    Figures,
    PipelineModel,
    WhatIf,
    WhatIfError,
    model_topology,
    unit_groups,
)
from streamscope.analysis.whatif.runmodel import pipeline_model, rate_of, w1_levels
from streamscope.analysis.whatif.terms import in_program_terms
from streamscope.core.fmt import pct
from streamscope.model import ModelInputError
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    Network,
    SimResult,
    simulate,
)
from streamscope.store.reader import Run


class Predictor:
    """One run's model, its unchanged replications and self-check, made once; ``predict``
    then simulates each set of changes against them (the same random numbers)."""

    def __init__(
        self,
        run: Run,
        *,
        replications: int = REPLICATIONS,
        seed: int = 0,
        tolerance: float = THROUGHPUT_TOLERANCE,
    ) -> None:
        self.run = run
        try:
            self.model = pipeline_model(run)
            self.seed, self.replications = seed, replications
            self.base_runs = [_sim(self.model.network, seed + i) for i in range(replications)]
        except ModelInputError as e:  # what the run gave the model, not the user's change
            raise WhatIfError(f"{run.path or 'the run'}: its model cannot be simulated: {e}") from e
        self.base = _figures(self.model.network, self.base_runs, self.model, scale=None)
        self.check = _check(self.model, self.base, self.base_runs, tolerance)

    def predict(self, changes: Sequence[str | Change]) -> WhatIf:
        chs = tuple(c if isinstance(c, Change) else Change.parse(c) for c in changes)
        model = self.model
        stages = [st.name for st in model.network.stages]
        changed = apply_changes(model, resolve(self.run, stages, chs))
        predicted = None
        if self.check.verdict == "consistent" and chs:
            try:
                new_runs = [_sim(changed, self.seed + i) for i in range(self.replications)]
            except ModelInputError as e:
                what = ", ".join(c.text for c in chs)
                raise WhatIfError(f"{what}: the changed model cannot be simulated: {e}") from e
            ratios = np.array([rate_of(changed, b2, model.program)
                               / rate_of(model.network, b1, model.program)
                               for b1, b2 in zip(self.base_runs, new_runs, strict=True)])  # fmt: skip
            predicted = _figures(changed, new_runs, model, scale=ratios)
        sentence = _sentence(chs, model, self.check, predicted)
        return WhatIf(chs, model, self.base, self.check, predicted, sentence, model.assumed)

    def obvious(self, run: Run, found: Sequence[Any] = ()) -> list[WhatIf]:
        """The changes a reader of this run would try first: for each unit that a
        ``bottleneck`` finding of ``found`` names (or, without one, the busiest unit after the
        sources in the model), twice its replicas and twice its speed; for each channel full
        half the time or more, twice its capacity."""
        units = {g.pattern: g for g in stage_groups(self.model.topology)}
        named = [g for f in found if getattr(f, "kind", "") == "bottleneck"
                 for g in units.values() if range_label(g.members) == f.target]  # fmt: skip
        if not named:  # no bottleneck: the busiest unit after the sources, in the model
            inner = [g for g in units.values()
                     if any(c.dst in g.members for c in self.model.topology.channels)]  # fmt: skip
            busy = self.base.busy
            named = sorted(inner, key=lambda g: -float(np.mean([busy[m] for m in g.members])))[:1]
        changes: list[str] = []
        for g in named:
            n = len(g.members)
            if self.model.program and n == 1:  # its workers on the same queue
                n = self.model.network.stage(g.members[0]).workers
            changes.append(f"{g.pattern if n > 1 else g.members[0]}.replicas={2 * n}")
            changes.append(f"{g.pattern}.speed=2x")
        caps = {c.name: c.capacity for c in run.topology.channels}
        changes.extend(
            f"{cs.channel}.capacity={2 * caps[cs.channel]}"
            for cs in channel_summary(run)
            if cs.full_fraction is not None and cs.full_fraction >= 0.5 and cs.channel in caps
        )
        return [self.predict([c]) for c in dict.fromkeys(changes)]


def whatif(
    run: Run,
    changes: Sequence[str | Change],
    *,
    replications: int = REPLICATIONS,
    seed: int = 0,
    tolerance: float = THROUGHPUT_TOLERANCE,
) -> WhatIf:
    """The prediction for ``changes`` on ``run`` (see the module docstring)."""
    p = Predictor(run, replications=replications, seed=seed, tolerance=tolerance)
    return p.predict(changes)


def _sim(net: Network, seed: int) -> SimResult:
    r = simulate(net, seed=seed, resample=True)
    if not r.complete:
        raise WhatIfError(
            "the simulated pipeline stalled (every stage waiting on another) before its sources "
            "made their items: a cycle of channels the model cannot run"
        )
    return r


def _figures(
    net: Network, runs: Sequence[SimResult], model: PipelineModel, scale: np.ndarray | None
) -> Figures:
    rates = np.array([rate_of(net, r, model.program) for r in runs])
    if scale is None:
        tp = float(np.median(rates))
        lo, hi = (float(q) for q in np.quantile(rates, [0.05, 0.95]))
    else:
        tp = model.throughput * float(np.median(scale))
        lo, hi = (model.throughput * float(q) for q in np.quantile(scale, [0.05, 0.95]))
    shares = {s.name: np.mean([r.shares(s.name) for r in runs], axis=0) for s in net.stages}
    occ = {c.name: float(np.mean([r.mean_occupancy(c.name) for r in runs])) for c in net.channels}
    levels = {c.name: np.mean([r.levels[c.name] / max(r.levels[c.name].sum(), 1e-300)
                               for r in runs], axis=0) for c in net.channels}  # fmt: skip
    locks = {k: float(np.mean([r.lock_busy[k] / r.end_ns for r in runs if r.end_ns > 0]))
             for k in runs[0].lock_busy}  # fmt: skip
    cores = float(np.mean([r.cores_busy / (r.end_ns * net.cores) for r in runs if r.end_ns > 0]))
    busy = {k: float(v[BUSY]) for k, v in shares.items()}
    label, limit = _limit(net, model, busy, locks, cores)
    return Figures(
        tp, lo, hi, busy,
        {k: float(v[BLOCKED_IN]) for k, v in shares.items()},
        {k: float(v[BLOCKED_OUT]) for k, v in shares.items()},
        occ, locks, cores, label, limit, levels=levels, topology=model_topology(net, model.topology),
    )  # fmt: skip


def _limit(
    net: Network, model: PipelineModel, busy: dict[str, float], locks: dict[str, float],
    cores: float,
) -> tuple[str, str]:  # fmt: skip
    """The unit that limits the rate (as the bottleneck pass names it), in words: the busiest
    unit after the sources if it is busy most of the time; else, where the threads of one
    process keep its interpreter lock busy, the busiest unit among them (waiting for the lock
    between items shows as waiting on channels: the bottleneck pass's rule too)."""
    topo = model_topology(net, model.topology)
    uses = {s.name: s.interpreter for s in net.stages}
    shared = {
        name: held for name, held in locks.items()
        if held >= BUSY_THRESHOLD
        and sum(s.workers for s in net.stages if s.interpreter == name) > 1
    }  # fmt: skip
    units = [
        (float(np.mean([busy[m] for m in g.members])), g)
        for g in unit_groups(topo)
        if not all(topo.stage(m).role == "source" for m in g.members)
    ]
    best = max(units, key=lambda u: u[0], default=None)
    if best is not None and best[0] < BUSY_THRESHOLD:
        on_lock = [u for u in units if any(uses[m] in shared for m in u[1].members)]
        best = max(on_lock, key=lambda u: u[0], default=None)
        if best is not None:
            name = uses[best[1].members[0]]
            return best[1].label, (
                f"{best[1].label} limits the rate through the interpreter lock of "
                f"{_process(name, model.program)} (held {pct(shared[name])} of the time)"
            )
    if best is None:
        return "", "the sources limit the rate: no stage downstream is busy most of the time"
    label = best[1].label
    why = f"{label} limits the rate (busy {pct(best[0])})"
    mine = [n for n in shared if any(uses[m] == n for m in best[1].members)]
    if mine:
        name = max(mine, key=lambda n: shared[n])
        why += (f", waiting on the interpreter lock of {_process(name, model.program)} "
                f"(held {pct(shared[name])} of the time)")  # fmt: skip
    elif cores >= BUSY_THRESHOLD:
        why += f", the CPUs busy {pct(cores)}"
    return label, why


def _process(interpreter: str, program: bool = False) -> str:
    if interpreter == "main":
        return "the program's process" if program else "the pipeline's process"
    return interpreter.split("+", maxsplit=1)[0]


def _check(model: PipelineModel, base: Figures, runs: Sequence[SimResult], tol: float) -> Check:
    rates = np.array([rate_of(model.network, r, model.program) for r in runs])
    err = base.throughput / model.throughput - 1
    spread = float(np.std(rates) / np.mean(rates)) if len(rates) > 1 else 0.0
    allowed = max(tol, 2 * spread)
    misses = []
    if abs(err) > allowed:
        misses.append(f"throughput {base.throughput:,.1f}/s against {model.throughput:,.1f}/s "
                      f"measured ({err:+.1%}; {allowed:.0%} allowed)")  # fmt: skip
    for stage, (b, _i, _o) in model.shares.items():
        if stage in base.busy and abs(base.busy[stage] - b) > STATE_TOLERANCE:
            misses.append(f"{stage} busy {pct(base.busy[stage])} against {pct(b)} measured")
    caps = {c.name: c.capacity for c in model.network.channels}
    for name, occ in model.occupancy.items():
        if name not in base.occupancy or name not in caps:
            continue
        allowed_items = max(1.0, OCCUPANCY_TOLERANCE * caps[name])
        if name in model.levels and name in base.levels:
            # The whole distribution: W1 is at least the difference of the means.
            w1 = w1_levels(model.levels[name], base.levels[name])
            if w1 > allowed_items:
                misses.append(f"{name}'s occupancy is {w1:.1f} items (W1) from the measured "
                              f"distribution (mean {base.occupancy[name]:.1f} against {occ:.1f}; "
                              f"{allowed_items:.1f} allowed)")  # fmt: skip
        elif abs(base.occupancy[name] - occ) > allowed_items:
            misses.append(f"{name} holds {base.occupancy[name]:.1f} items against {occ:.1f} "
                          f"measured ({allowed_items:.1f} allowed)")  # fmt: skip
    return Check("rejected" if misses else "consistent", err, allowed, tuple(misses))


def _sentence(
    chs: Sequence[Change], model: PipelineModel, check: Check, pred: Figures | None
) -> str:
    if check.verdict != "consistent":
        return ("The model does not reproduce this run, so it predicts nothing: "
                + "; ".join(check.misses) + ".")  # fmt: skip
    if pred is None:
        return (f"The model reproduces this run (throughput {check.throughput_error:+.1%}); "
                "give a change to predict (--set).")  # fmt: skip
    gain = pred.throughput / model.throughput - 1
    half = max(pred.high - pred.throughput, pred.throughput - pred.low) / model.throughput
    what = ", ".join(c.text for c in chs)
    said = [t for t in (in_program_terms(c, model.how) for c in chs) if t] if model.program else []
    if said:
        what += f" ({'; '.join(said)})"
    then = f"then {pred.limit}" if pred.bottleneck else pred.limit
    return (f"{what}: {model.throughput:,.1f} → {pred.throughput:,.1f} items/s, "
            f"{gain:+.0%} (±{half:.0%}); {then}.")  # fmt: skip
