"""Each stage's service times, as its workers' state trackers sampled them (a program's).

In: the DURATION and SAMPLE records a state tracker writes beside its STATE records, three per
timed item (``_native_state.c``: the ns the worker was busy on the item, its thread's CPU ns
then, and its ns waiting for a core over it; -1: not read). Out: per stage, a uniform sample of
at most ``KEEP`` (wall, CPU, run queue) triples over the run and how many were offered (the
``service`` table's rows).
"""

from __future__ import annotations

import random

import numpy as np

from streamscope.core.records import Kind, Records

#: Service-time samples kept per stage at most (a uniform reservoir over the run), as the
#: pipeline runner keeps per stage thread.
KEEP = 4096
#: The record kinds a state tracker's timed item is written as.
SERVICE_KINDS = (int(Kind.DURATION), int(Kind.SAMPLE))


class ServiceTimes:
    """The reservoirs, by stage (mutable: filled as the rings are drained)."""

    def __init__(self, keep: int = KEEP, seed: int = 0) -> None:
        self.keep = keep
        self.kept: dict[str, list[tuple[int, int | None, int | None]]] = {}
        self.seen: dict[str, int] = {}
        self._rng = random.Random(seed)

    def take(self, stage: str, rec: Records) -> None:
        """One probe's service records, in the order written: each DURATION with the SAMPLEs
        after it (its CPU time, its run queue's; a DURATION without them has neither)."""
        kinds = rec["kind"].astype(np.int64).tolist()
        values = rec["value"].astype(np.int64).tolist()
        kept = self.kept.setdefault(stage, [])
        seen = self.seen.get(stage, 0)
        for i, k in enumerate(kinds):
            if k != Kind.DURATION:
                continue
            after = [values[j] for j in (i + 1, i + 2)
                     if j < len(kinds) and kinds[j] == Kind.SAMPLE]  # fmt: skip
            cpu, runq = (*after, -1, -1)[:2]
            pair = (values[i], cpu if cpu >= 0 else None, runq if runq >= 0 else None)
            seen += 1
            if len(kept) < self.keep:
                kept.append(pair)
            else:
                j = self._rng.randrange(seen)
                if j < self.keep:
                    kept[j] = pair
        self.seen[stage] = seen


__all__ = ["KEEP", "SERVICE_KINDS", "ServiceTimes"]
