"""The bottleneck rule: which stages (or groups of replicas) the run shows limiting the rate.

In: the run's topology, stage breakdowns and channel summaries, and the thresholds. Out: ``units``
(each ``StageGroup`` with its figures, a ``Unit``) and, for each unit the rule picks, a
``Candidate`` with its score and severity (``judge``); ``stragglers`` picks single replicas that
hold their group up. The rule itself is told in ``streamscope.analysis.bottleneck``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamscope.analysis.breakdown import ChannelSummary, StageBreakdown
from streamscope.analysis.groups import StageGroup
from streamscope.core.topology import Topology

#: How much busier than its group's mean a replica must be to be named alone (a straggler).
STRAGGLER_MARGIN = 0.2


@dataclass(frozen=True, slots=True)
class Unit:
    """A stage group with its figures: each state the mean over its members with states.

    ``role``: ``source``, ``sink`` or ``stage``; ``busy_by_member``: each measured member's busy
    fraction; ``frames``: the frames its states come from; ``ins``/``outs``: the summaries of
    the channels into and out of it (those the run has).
    """

    group: StageGroup
    role: str
    busy: float | None
    idle: float | None
    blocked_in: float | None
    blocked_out: float | None
    busy_by_member: dict[str, float]
    frames: tuple[int, ...]
    ins: tuple[ChannelSummary, ...]
    outs: tuple[ChannelSummary, ...]

    @property
    def name(self) -> str:
        return self.group.label


@dataclass(frozen=True, slots=True)
class Candidate:
    """A unit the rule says may limit the rate, with what it read to say so.

    ``in_chs``/``out_chs``: the channels judged (the fullest input and the least empty output of
    a single stage; all of a group's); ``in_full``/``out_empty``: their fractions; ``partial``:
    its output's fill was not measured. ``straggler_of``: the group of a replica busier than
    its group, which is not rate-limiting on average (``None`` otherwise).
    """

    unit: Unit
    score: float
    severity: str
    in_chs: tuple[ChannelSummary, ...]
    out_chs: tuple[ChannelSummary, ...]
    in_full: float | None
    out_empty: float | None
    partial: bool
    straggler_of: Unit | None = None


def unit(
    group: StageGroup,
    by_stage: dict[str, StageBreakdown],
    chans: dict[str, ChannelSummary],
    role: str | None = None,
) -> Unit:
    """``group`` with its figures; ``role`` overrides the role read from the topology."""
    seen = [by_stage[m] for m in group.members if by_stage[m].busy is not None]

    def mean(attr: str) -> float | None:
        return _mean(getattr(b, attr) for b in seen)

    ins = tuple(chans[c] for c in group.ins if c in chans)
    outs = tuple(chans[c] for c in group.outs if c in chans)
    if role is None:
        role = by_stage[group.members[0]].role
        if group.replicas or group.aliases or group.ins or group.outs:
            # As its channels say: a program's stages are declared before their channels are
            # known (its main thread feeding a queue is a source).
            role = "source" if not group.ins else "sink" if not group.outs else "stage"
    return Unit(
        group,
        role,
        mean("busy"),
        mean("idle"),
        mean("blocked_in"),
        mean("blocked_out"),
        {b.stage: b.busy for b in seen if b.busy is not None},
        tuple(sorted({f for b in seen for f in b.frames})),
        ins,
        outs,
    )


def judge(
    u: Unit, busy_threshold: float, mostly: float, straggler_of: Unit | None = None
) -> Candidate | None:
    """``u`` as a bottleneck candidate, ``None`` when nothing says it limits the rate.

    A single stage is judged by its fullest input and its least empty output; a group by the
    mean over its channels in and out (they are one stage's inputs and outputs, many times).
    """
    in_chs, in_full = _inputs(u)
    out_chs, out_empty = _outputs(u)
    out_full = max((c.full_fraction or 0.0 for c in u.outs), default=0.0)
    chan: float | None = None
    partial = False
    if in_full is not None:
        if not u.outs:
            chan = in_full
        elif out_empty is not None:
            chan = min(in_full, out_empty)
        elif out_full < mostly:
            chan, partial = in_full, True  # nothing known about its output
    busy_ok = u.busy is not None and u.busy >= busy_threshold
    chan_ok = chan is not None and chan >= mostly
    if not (busy_ok or chan_ok):
        return None
    score = (u.busy or 0.0) + (0.5 * chan if partial and chan else (chan or 0.0))
    strong = (busy_ok and (chan is None or chan_ok)) or (chan_ok and u.busy is None)
    severity = "problem" if strong and not (partial and u.busy is None) else "warning"
    return Candidate(u, score, severity, in_chs, out_chs, in_full, out_empty, partial, straggler_of)


def _inputs(u: Unit) -> tuple[tuple[ChannelSummary, ...], float | None]:
    """The input channels judged and their full fraction (see ``judge``)."""
    known = [c for c in u.ins if c.full_fraction is not None]
    if not known:
        return (), None
    if u.group.replicas:
        return tuple(known), _mean(c.full_fraction for c in known)
    fullest = max(known, key=lambda c: c.full_fraction or 0.0)
    return (fullest,), fullest.full_fraction


def _outputs(u: Unit) -> tuple[tuple[ChannelSummary, ...], float | None]:
    """The output channels judged and their empty fraction (see ``judge``)."""
    known = [c for c in u.outs if c.empty_fraction is not None]
    if not known:
        return (), None
    if u.group.replicas:
        return tuple(known), _mean(c.empty_fraction for c in known)
    least = min(known, key=lambda c: c.empty_fraction or 0.0)
    return (least,), least.empty_fraction


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def stragglers(
    u: Unit,
    by_stage: dict[str, StageBreakdown],
    chans: dict[str, ChannelSummary],
    topo: Topology,
    busy_threshold: float,
    mostly: float,
) -> list[Candidate]:
    """Members of group ``u`` busy enough to limit the rate while the group, on average, is not:
    with work dealt in turn, one slow replica holds up all of them. A member only a little
    busier than the others (less than ``STRAGGLER_MARGIN`` above the group's mean) is the
    group's own spread, not a straggler."""
    out = []
    mean = u.busy or 0.0
    for m in u.group.members:
        busy = by_stage[m].busy or 0.0
        if busy < busy_threshold or busy - mean < STRAGGLER_MARGIN:
            continue
        ins = tuple(dict.fromkeys(c.name for c, _, b in topo.links() if b == m)) or u.group.ins
        outs = tuple(dict.fromkeys(c.name for c, a, _ in topo.links() if a == m)) or u.group.outs
        one = unit(StageGroup(m, (m,), ins=ins, outs=outs), by_stage, chans, role=u.role)
        c = judge(one, busy_threshold, mostly, straggler_of=u)
        if c is not None:
            out.append(c)
    return out
