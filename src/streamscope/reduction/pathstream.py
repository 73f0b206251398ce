"""A path's tagged items, paired: latency from a stage to another, item by item.

In: the DEPART records of a path's origin (value: the tag an item left with, at the time it was
put into a channel out of the first stage) and the ARRIVE records of its end (value: the tag of
an item taken from a channel into the last stage), in virtual ns, up to a watermark. Out: one
latency event per arrival whose departure is known, at the arrival's time (a generator's several
outputs of one item: one each), fed to the path's ``latency`` reducers. A departure is kept for
``HORIZON_NS`` after it left (what has not arrived by then was dropped on the way, or absorbed by
an aggregator that passed on an older tag: counted); an arrival whose departure is unknown (it
left before the run's records of it, or its record was refused) is counted, not guessed.

Across clock domains (an origin on a device, its end on the host) each record comes with the
half-width of its batch's time bounds: a frame's uncertainty is the largest departure's plus
the largest arrival's, and an arrival before its departure is a causality violation (the
clocks' map is off by at least that much: counted, the latency taken as 0 and the uncertainty
widened to cover it), as for a channel's latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamscope.reduction.streams import EMPTY, I64, Events, Pending, Reducers, Stream

#: How long a departure waits for its arrivals (ns of virtual time).
HORIZON_NS = 60_000_000_000


@dataclass(frozen=True, slots=True)
class PathOutput:
    """One advance of a path: its latencies, causality violations and time uncertainty."""

    latency: Events
    violations: I64
    uncertainty_ns: float


class PathStream(Stream):
    """One path (``SRC ~> DST``): its departures and arrivals, paired by tag."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.last_t = 0
        self._departed: dict[int, tuple[int, float]] = {}  # tag -> (time it left, half-width)
        self._arrivals = Pending()
        self._arrival_hw = 0.0  # the largest half-width of the arrivals since the last advance
        #: Arrivals whose departure was not known (not paired), departures that never arrived.
        self.unmatched = 0
        self.lost = 0

    def add(self, t_ns: I64, value: I64) -> None:  # pragma: no cover - fed through PathEnd
        raise TypeError("a path is fed through its PathEnd taps")

    def depart(self, t_ns: I64, tags: I64, halfwidth: float = 0.0) -> None:
        for t, tag in zip(t_ns.tolist(), tags.tolist(), strict=True):
            self._departed.setdefault(tag, (t, halfwidth))

    def arrive(self, t_ns: I64, tags: I64, halfwidth: float = 0.0) -> None:
        self._arrivals.add(t_ns, tags)
        if len(t_ns):
            self._arrival_hw = max(self._arrival_hw, halfwidth)

    def advance(self, until: int) -> PathOutput:
        until = max(until, self.last_t)
        t, tags = self._arrivals.pop_before(until)
        self.last_t = until
        found = [self._departed.get(g) for g in tags.tolist()]
        left = np.array([-1 if f is None else f[0] for f in found], dtype=np.int64)
        known = left >= 0
        self.unmatched += int((~known).sum())
        t, lat = t[known], t[known] - left[known]
        hw = max((f[1] for f in found if f is not None), default=0.0)
        uncertainty = hw + self._arrival_hw if len(t) else 0.0
        self._arrival_hw = 0.0
        violations = t[lat < 0] if len(t) else EMPTY
        if len(violations):
            uncertainty = max(uncertainty, float(-lat.min()))
            lat = np.maximum(lat, 0)
        horizon = until - HORIZON_NS
        if horizon > 0 and self._departed:
            old = [g for g, (at, _) in self._departed.items() if at < horizon]
            for g in old:
                del self._departed[g]
            self.lost += len(old)
        return PathOutput(Events(t, lat), violations, uncertainty)

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        assert isinstance(out, PathOutput)
        for r in reducers("latency", self.name):
            r.add_quality(out.violations, out.uncertainty_ns, since, until)
            r.add_events(out.latency)


class PathEnd(Stream):
    """The DEPART or ARRIVE probe of one channel, feeding every path it starts or ends."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.paths: list[PathStream] = []
        #: The half-width of the time bounds of the batch being added (set by the router).
        self.halfwidth_ns = 0.0

    @property
    def last_t(self) -> int:  # type: ignore[override]
        """Records before it come too late for a path it feeds (reduced past them)."""
        return min((p.last_t for p in self.paths), default=0)

    def add(self, t_ns: I64, value: I64) -> None:
        for p in self.paths:
            (p.depart if self.role == "depart" else p.arrive)(t_ns, value, self.halfwidth_ns)

    def advance(self, until: int) -> object:
        return None

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        """Nothing: its paths reduce themselves."""
