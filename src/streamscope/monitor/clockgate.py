"""When records can be placed in time: what waits for a clock's calibration bursts.

In: batches of records (and device messages) of each clock domain, and the domain's bursts as
they arrive (``timebase.domains``). Out: the batches ready to place, as the bursts allow:
a domain's records wait for its first burst; records past its latest burst are held until a
later one brackets them (interpolation, never extrapolation past a step or a change of rate).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from streamscope.core.records import Kind, Records
from streamscope.core.topology import HOST
from streamscope.timebase.domains import Domains
from streamscope.transport.wire import Message


@dataclass(frozen=True, slots=True)
class Batch:
    """Records of one domain in raw ticks, and refusals noticed at known virtual times."""

    records: Records
    drops: tuple[tuple[int, int, int], ...] = ()  # (probe, t_report_ns, count)


class ClockGate:
    """What waits, per clock domain (mutable: batches come and go with the bursts)."""

    def __init__(self, domains: Domains) -> None:
        self.domains = domains
        #: Batches and device messages of domains not yet calibrated, in arrival order.
        self.waiting: dict[str, list[Batch | Message]] = {}
        #: Batches of a domain past its latest burst, in arrival order: placed only once a
        #: later burst brackets them, and frames wait for them.
        self.held: dict[str, list[Batch]] = {}
        #: Every burst of the run is known already (``retime``): nothing waits for another.
        self.final = False

    def ready(self, domain: str) -> bool:
        """Whether ``domain``'s records can be placed at all (its first burst came)."""
        return self.domains.ready(domain)

    def wait(self, domain: str, item: Batch | Message) -> None:
        """Keep ``item`` until ``domain``'s first burst (milliseconds after its start)."""
        self.waiting.setdefault(domain, []).append(item)

    def waits(self) -> bool:
        """Whether anything waits for a domain's first burst (frames cannot close then)."""
        return any(self.waiting.values())

    def holds(self) -> bool:
        """Whether any records wait for a later burst."""
        return any(self.held.values())

    def calibrated(self, domain: str) -> tuple[list[Batch | Message], list[Batch]]:
        """A burst of ``domain`` came: what waited for its first one, and what was held for
        the next (to be taken again: what this burst does not bracket is held again)."""
        return self.waiting.pop(domain, []), self.held.pop(domain, [])

    def bracketed(self, domain: str, batch: Batch) -> Batch | None:
        """The part of ``batch`` its domain's bursts bracket; the rest is held for the next."""
        rec = batch.records
        if domain == HOST or not len(rec) or self.final:
            return batch
        bracket = self.domains.bracket_ticks(domain)
        past = rec["ticks"] > bracket if bracket is not None else np.ones(len(rec), dtype=bool)
        if not past.any():
            return batch
        # Refusals noticed after these records go with the latest of them.
        self.held.setdefault(domain, []).append(Batch(rec[past], batch.drops))
        return None if past.all() else Batch(rec[~past])

    def device_rows(
        self, domain: str, batch: Batch
    ) -> tuple[Records, list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """A batch's records without a device's bookkeeping rows, and those rows: refusals
        ``(probe, t_ns, count)`` (DROPPED rows that waited for its calibration, besides the
        batch's own) and each probe's latest refused value ``(probe, seq, t_ns)`` (REFUSED)."""
        rec = batch.records
        drops = list(batch.drops)
        late_seqs: list[tuple[int, int, int]] = []
        refused = rec["kind"] == Kind.REFUSED
        if refused.any():
            t, _ = self.domains.to_ns(domain, rec["ticks"][refused].astype(np.int64))
            late_seqs = list(zip(
                rec["probe"][refused].tolist(), rec["value"][refused].tolist(), t.tolist(),
                strict=True,
            ))  # fmt: skip
            rec = rec[~refused]
        held = rec["kind"] == Kind.DROPPED
        if held.any():
            t, _ = self.domains.to_ns(domain, rec["ticks"][held].astype(np.int64))
            drops += zip(
                rec["probe"][held].tolist(), t.tolist(), rec["value"][held].tolist(), strict=True
            )
            rec = rec[~held]
        return rec, drops, late_seqs

    def brackets(self, watermark_ns: int) -> list[int]:
        """For each domain that holds records past its latest burst: where that burst ends, in
        virtual ns (frames after it wait for the next burst; ``watermark_ns`` if none yet)."""
        out = []
        for domain, held in self.held.items():
            if not held:
                continue
            bracket = self.domains.bracket_ticks(domain)
            if bracket is None:  # not bracketed at all yet: nothing passes
                out.append(watermark_ns)
            else:
                out.append(max(self.domains.scalar_to_ns(domain, bracket), 0))
        return out

    def release(self) -> Iterator[tuple[str, Batch]]:
        """Everything held, to be placed as the latest fits extrapolate (no burst came after
        it: a device that stopped answering, or the view of frames not final yet)."""
        held, self.held = self.held, {}
        for domain, batches in held.items():
            for batch in batches:
                yield domain, batch

    def never_placed(self) -> Iterator[Records]:
        """At the end: the records of domains never calibrated, batches and device messages
        alike (they cannot be placed in time; the caller counts them as dropped)."""
        waiting, self.waiting = self.waiting, {}
        for items in waiting.values():
            yield from (item.records for item in items)
