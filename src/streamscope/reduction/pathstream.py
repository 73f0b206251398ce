"""A path's tagged items, paired: latency from a stage to another, item by item.

In: the DEPART records of a path's origin (value: the tag an item left with, at the time it was
put into a channel out of the first stage) and the ARRIVE records of its end (value: the tag of
an item taken from a channel into the last stage), in virtual ns, up to a watermark. Out: one
latency event per arrival whose departure is known, at the arrival's time (a generator's several
outputs of one item: one each), fed to the path's ``latency`` reducers. A departure is kept for
``HORIZON_NS`` after it left (what has not arrived by then was dropped on the way, or absorbed by
an aggregator that passed on an older tag: counted); an arrival whose departure is unknown (it
left before the run's records of it, or its record was refused) is counted, not guessed.
"""

from __future__ import annotations

import numpy as np

from streamscope.reduction.streams import I64, Events, Pending, Reducers, Stream

#: How long a departure waits for its arrivals (ns of virtual time).
HORIZON_NS = 60_000_000_000


class PathStream(Stream):
    """One path (``SRC ~> DST``): its departures and arrivals, paired by tag."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.last_t = 0
        self._departed: dict[int, int] = {}  # tag -> time it left
        self._arrivals = Pending()
        #: Arrivals whose departure was not known (not paired), departures that never arrived.
        self.unmatched = 0
        self.lost = 0

    def add(self, t_ns: I64, value: I64) -> None:  # pragma: no cover - fed through PathEnd
        raise TypeError("a path is fed through its PathEnd taps")

    def depart(self, t_ns: I64, tags: I64) -> None:
        for t, tag in zip(t_ns.tolist(), tags.tolist(), strict=True):
            self._departed.setdefault(tag, t)

    def arrive(self, t_ns: I64, tags: I64) -> None:
        self._arrivals.add(t_ns, tags)

    def advance(self, until: int) -> Events:
        until = max(until, self.last_t)
        t, tags = self._arrivals.pop_before(until)
        self.last_t = until
        left = np.array([self._departed.get(g, -1) for g in tags.tolist()], dtype=np.int64)
        known = left >= 0
        self.unmatched += int((~known).sum())
        t, lat = t[known], t[known] - left[known]
        ok = lat >= 0  # one clock on both ends: a departure after its arrival is a wrong pairing
        self.unmatched += int((~ok).sum())
        horizon = until - HORIZON_NS
        if horizon > 0 and self._departed:
            old = [g for g, at in self._departed.items() if at < horizon]
            for g in old:
                del self._departed[g]
            self.lost += len(old)
        return Events(t[ok], lat[ok])

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        assert isinstance(out, Events)
        for r in reducers("latency", self.name):
            r.add_events(out)


class PathEnd(Stream):
    """The DEPART or ARRIVE probe of one channel, feeding every path it starts or ends."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.paths: list[PathStream] = []

    @property
    def last_t(self) -> int:  # type: ignore[override]
        """Records before it come too late for a path it feeds (reduced past them)."""
        return min((p.last_t for p in self.paths), default=0)

    def add(self, t_ns: I64, value: I64) -> None:
        for p in self.paths:
            (p.depart if self.role == "depart" else p.arrive)(t_ns, value)

    def advance(self, until: int) -> object:
        return None

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        """Nothing: its paths reduce themselves."""
