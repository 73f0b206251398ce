"""On-device reduction of a virtual queue's visible sub-queue, as in Lancaster, Wingbermuehle,
Beard & Chamberlain, Crossing Boundaries in TimeTrial (2011).

In: the raw records of the two taps of a device-side buffer (and of its producer's state tracker
when a query watches it), in the device's ticks, and where the host's run start lies in those
ticks and how many ticks make a ns (sent by the runner after the device's first calibration
burst), which place the host's frame grid on the device's clock. Out: one summary per frame (level
histogram, inter-insertion and back-to-back inter-departure histograms, counts, and the insertions
per sub-window, which let the model keep bursts), encoded for a SUMMARY message; the raw records
themselves stay on the device unless tracing is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from streamscope.agents.assignments import LocalQueue, LocalState
from streamscope.aggregate.stateframes import StateFrames, encode_state_frames
from streamscope.aggregate.subqueue import PROFILE_BINS, SubQueueFrames, encode_summaries
from streamscope.core.records import Kind, Records

#: How long the end of a run waits for a grid that has not come yet (its first burst failed).
GRID_WAIT_S = 2.0
#: How far before a frame it has not closed yet an agent that reduces states holds its
#: watermark (ns): the monitor's clock map and the agent's grid may differ by that much.
HOLD_MARGIN_NS = 5_000_000


class FrameReducer(Protocol):
    """A host's own frames of the pairs whose taps all lie there (``agents.host``)."""

    #: The probes whose records it takes.
    probes: frozenset[int]

    def set_grid(self, origin_ticks: float, ticks_per_ns: float) -> None: ...

    def set_remote_grid(self, domain: str, origin_ticks: float, ticks_per_ns: float) -> None:
        """Where the run's grid lies on another domain's clock (items stamped there)."""
        ...

    def add(self, records: Records) -> None: ...

    def close_until(self, watermark_ticks: int) -> list[bytes]: ...

    def finish(self, end_ticks: int) -> list[bytes]: ...


class LocalReduction:
    """The device agent's reducer (see ``agents.ship.LocalReducer``)."""

    def __init__(
        self,
        queues: tuple[LocalQueue, ...],
        tick_ns: float,
        grid: Any,
        states: tuple[LocalState, ...] = (),
        frames: FrameReducer | None = None,
        shipped: frozenset[int] | None = None,
        reducer: Callable[[LocalQueue, float], Any] | None = None,
    ) -> None:
        """``frames``: a host's pairs it reduces to frames itself; ``shipped``: on a host, the
        probes whose records go to the monitor (what it reads itself): every other record
        stays here (None, a device: what it does not reduce goes); ``reducer``: what reduces
        a sub-queue (given it and the tick), if not ``SubQueueFrames`` (an RTL device's
        channel monitor core, ``hw.subqueue.CoreSubQueue``)."""
        self.queues = queues
        make = reducer or (
            lambda q, tick: SubQueueFrames(tick, states=q.state_probe != 0, profile=PROFILE_BINS)
        )
        self.frames = {q.key: make(q, tick_ns) for q in queues}
        #: A host's stages whose states it reduces to frames (by state probe).
        self.states = {st.probe: (st, StateFrames()) for st in states}
        self._grid = grid  # the child's end of the runner's pipe, or None
        self._has_grid = False
        self._ticks_per_ns = 1.0 / tick_ns
        self.host_frames = frames
        #: Records reduced here rather than sent (what summaries saved the link), per probe.
        self.kept_by_probe: dict[int, int] = {}
        #: Probes whose records stay here (the state tracker's of a sub-queue's producer also
        #: go out: a query asked; a host's reduced stages' do not).
        here = {p for q in queues if not q.raw for p in (q.insert_probe, q.remove_probe)}
        here |= set(self.states)
        self._local = np.array(sorted(here), dtype=np.int64)
        self._ships = None if shipped is None else np.array(sorted(shipped), dtype=np.int64)

    @property
    def kept(self) -> int:
        """Records reduced here rather than sent."""
        return sum(self.kept_by_probe.values())

    def _poll_grid(self, wait_s: float = 0.0) -> None:
        """Take every grid the runner has sent (the first, then refinements); the latest wins."""
        while self._grid is not None:
            try:
                if not self._grid.poll(wait_s if not self._has_grid else 0.0):
                    return
                got = self._grid.recv()
            except (EOFError, OSError):
                self._grid = None
                return
            if len(got) == 3:  # another clock domain's (a producer whose items this pairs)
                if self.host_frames is not None:
                    self.host_frames.set_remote_grid(str(got[2]), float(got[0]), float(got[1]))
                continue
            origin, ticks_per_ns = got
            for q in self.queues:
                self.frames[q.key].set_grid(float(origin), q.frame_ns * float(ticks_per_ns))
            for st, fr in self.states.values():
                fr.set_grid(float(origin), st.frame_ns * float(ticks_per_ns))
            if self.host_frames is not None:
                self.host_frames.set_grid(float(origin), float(ticks_per_ns))
            self._ticks_per_ns = float(ticks_per_ns)
            self._has_grid = True

    def _feed(self, records: Records) -> None:
        # Refusals (DROPPED and REFUSED rows) are not events: they go out to the monitor as they
        # are; the latest refused sequence numbers keep the sub-queues' totals exact.
        kinds = records["kind"]
        refusals = (kinds == Kind.DROPPED) | (kinds == Kind.REFUSED)
        probe = np.where(refusals, -1, records["probe"].astype(np.int64))
        refused = records[kinds == Kind.REFUSED]
        for q in self.queues:
            fr = self.frames[q.key]
            for pid, know in (
                (q.insert_probe, fr.know_insertions),
                (q.remove_probe, fr.know_removals),
            ):
                sel = refused["value"][refused["probe"] == pid]
                if len(sel):
                    know(int(sel.max()))
            for pid, add in (
                (q.insert_probe, fr.add_insertions),
                (q.remove_probe, fr.add_removals),
            ):
                sel = records[probe == pid]
                if len(sel):
                    add(sel["ticks"].astype(np.int64), sel["value"].astype(np.int64))
            if q.state_probe:
                sel = records[probe == q.state_probe]
                if len(sel):
                    fr.add_states(sel["ticks"].astype(np.int64), sel["value"].astype(np.int64))
        for pid, (_, sf) in self.states.items():
            sel = records[probe == pid]
            if len(sel):
                sf.add(sel["ticks"], sel["value"])
        if self.host_frames is not None:
            self.host_frames.add(records)

    def reduce(self, records: Records, watermark: int) -> tuple[Records, list[bytes]]:
        """Keep this flush's sub-queue records; the ones to ship, and summaries now complete."""
        self._poll_grid()
        if len(records):
            self._feed(records)
            if self._local.size or self._ships is not None:
                kinds = records["kind"]
                shipped = (kinds == Kind.DROPPED) | (kinds == Kind.REFUSED)
                if self._ships is not None:
                    here = ~np.isin(records["probe"], self._ships) & ~shipped
                else:
                    here = np.isin(records["probe"], self._local) & ~shipped
                if here.any():
                    ids, counts = np.unique(records["probe"][here], return_counts=True)
                    for pid, n in zip(ids.tolist(), counts.tolist(), strict=True):
                        self.kept_by_probe[pid] = self.kept_by_probe.get(pid, 0) + n
                records = records[~here]
        if not self._has_grid:
            return records, []
        out = []
        for key, fr in self.frames.items():
            done = fr.close_until(watermark)
            if done:
                out.append(encode_summaries(key, done))
        for pid, (_, sf) in self.states.items():
            closed = sf.close_until(watermark)
            if closed:
                out.append(encode_state_frames(pid, closed))
        if self.host_frames is not None:
            out += self.host_frames.close_until(watermark)
        return records, out

    def hold(self, watermark: int, floor: int) -> int:
        """The watermark to send: no later than the start of a frame of states not closed yet
        (less a margin), so that the monitor closes no frame before its states are here;
        ``floor`` (the agent's first time) while there is no grid to close them on."""
        if not self.states:
            return watermark
        if not self._has_grid:
            return min(watermark, floor)
        margin = HOLD_MARGIN_NS * self._ticks_per_ns
        opens = [sf.open_from() for _, sf in self.states.values()]
        return min(watermark, *(int(o - margin) for o in opens if o is not None))

    def finish(self, end: int) -> list[bytes]:
        self._poll_grid(GRID_WAIT_S)
        if not self._has_grid:
            return []
        out = []
        for key, fr in self.frames.items():
            done = fr.finish(end)
            if done:
                out.append(encode_summaries(key, done))
        for pid, (_, sf) in self.states.items():
            closed = sf.finish(end)
            if closed:
                out.append(encode_state_frames(pid, closed))
        if self.host_frames is not None:
            out += self.host_frames.finish(end)
        return out
