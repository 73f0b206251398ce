"""One function of a stage made faster (``STAGE.speed[FUNCTION]=2x``), as the model takes it:
the stage's own speed-up by that function's share of its busy time only (Amdahl's law).

In: a change that names a function, the model's stages and the run's sampled stacks
(``analysis.hotspots``). Out: per stage the change matches, a plain ``speed`` change by the
whole stage's factor ``1 / ((1 - f) + f / k)``, where ``f`` is the share of the stage's busy
time spent in the function (what it called included) and ``k`` the function's speed-up; or a
clear refusal when the stage's stacks were not sampled or the function never ran in it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import replace

from streamscope.analysis.hotspots import BUSY_STATES, stack_rows
from streamscope.analysis.whatif.kinds import Change, WhatIfError
from streamscope.store.reader import Run


def function_name(frame: str) -> str:
    """``Image.scale (img.py:12)`` → ``Image.scale``."""
    return frame.split(" (", 1)[0]


def names_function(frame: str, pattern: str) -> bool:
    """Whether ``frame`` is the function ``pattern`` names: its qualified name, its last part
    (``scale`` for ``Image.scale``) or a wildcard pattern of either."""
    name = function_name(frame)
    last = name.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(n, pattern) for n in (name, last))


def function_shares(
    rows: Iterable[tuple[str, str, str, int, int]], stage: str, pattern: str
) -> tuple[float, int, list[str]]:
    """In ``stage``'s busy samples (``stack_rows``): the share of its busy time inside a
    function ``pattern`` names, its busy ns, and its hottest functions (for a refusal)."""
    busy = inside = 0
    own: dict[str, int] = {}
    for st, state, stack, _, ns in rows:
        if st != stage or state not in BUSY_STATES:
            continue
        busy += ns
        frames = stack.split(";") if stack else []
        if any(names_function(f, pattern) for f in frames):
            inside += ns
        if frames and state != "waiting":
            own[function_name(frames[-1])] = own.get(function_name(frames[-1]), 0) + ns
    hottest = sorted(own, key=lambda f: -own[f])[:3]
    return (inside / busy if busy else 0.0), busy, hottest


def resolve(run: Run, stages: Sequence[str], changes: Sequence[Change]) -> tuple[Change, ...]:
    """``changes`` with each that names a function made a whole-stage ``speed`` change per
    stage it matches (the others as they are)."""
    if not any(c.function for c in changes):
        return tuple(changes)
    rows = stack_rows(run)
    out: list[Change] = []
    for ch in changes:
        if not ch.function:
            out.append(ch)
            continue
        members = [s for s in stages if fnmatch.fnmatchcase(s, ch.target)]
        if not members:
            raise WhatIfError(
                f"change {ch.text!r}: no stage matches {ch.target!r}; stages: {', '.join(stages)}"
            )
        for stage in members:
            share, busy, hottest = function_shares(rows, stage, ch.function)
            if not busy:
                raise WhatIfError(
                    f"change {ch.text!r}: {stage}'s stacks were not sampled busy in this run "
                    "(run it with stacks on: they are unless --no-stacks)"
                )
            if share <= 0:
                raise WhatIfError(
                    f"change {ch.text!r}: no function named {ch.function!r} ran in {stage}'s "
                    f"sampled busy time; its hottest: {', '.join(hottest) or 'none'}"
                )
            factor = 1.0 / ((1.0 - share) + share / ch.value)
            out.append(replace(ch, target=stage, value=factor, function=""))
    return tuple(out)


__all__ = ["function_shares", "names_function", "resolve"]
