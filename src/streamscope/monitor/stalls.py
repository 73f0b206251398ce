"""Stages busy without finishing anything: stalls, said live and kept for the run file.

In: each stage worker's stream as the watermark passes (its state and its last record's time).
Out: the stalls open now (``current``) and every stall the run had (``rows``: closed ones, and
whether each was still going on).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscope.core.options import DEFAULT_STALL_NS
from streamscope.core.records import State
from streamscope.reduction.streams import StageStream


@dataclass(frozen=True, slots=True)
class Stall:
    """A stage busy without finishing: since ``start_ns`` (its last state change) to
    ``end_ns`` (as far as the monitor has seen), virtual ns."""

    stage: str
    start_ns: int
    end_ns: int


class StallWatch:
    """Open, extend and close each worker's stall (mutable: stalls open and close as the
    watermark moves)."""

    def __init__(self, stall_ns: int = DEFAULT_STALL_NS) -> None:
        self.stall_ns = stall_ns
        self.open: dict[int, Stall] = {}
        self._closed: list[tuple[Stall, bool]] = []

    def watch(self, pid: int, stream: StageStream, wm: int) -> None:
        """Worker ``pid`` at watermark ``wm``: stalled if busy since its last record for
        ``stall_ns``."""
        since = stream.last_record_t
        busy = stream.state == State.BUSY and wm - since >= self.stall_ns
        was = self.open.get(pid)
        if was is not None and (not busy or was.start_ns != since):
            del self.open[pid]
            # A worker whose process was stopped while stuck never went on: still stalled.
            self._closed.append((was, stream.gone))
        if busy:
            self.open[pid] = Stall(stream.name, since, wm)

    def current(self) -> list[Stall]:
        """Stages stalled now, by stage."""
        return sorted(self.open.values(), key=lambda x: (x.stage, x.start_ns))

    def rows(self) -> list[tuple[Stall, bool]]:
        """Every stall of the run, and whether it was still going on when it was last seen."""
        return self._closed + [(x, True) for x in self.open.values()]
