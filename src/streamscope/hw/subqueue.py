"""The RTL device's sub-queue reducer: a channel's records played into the channel monitor core
(``hw.channel``) at their ticks, each frame's summary read from the core's registers over the
link.

In: what ``aggregate.subqueue.SubQueueFrames`` takes (insertion, removal and producer-state
records in the device's ticks, the run's frame grid, watermarks). Out: the same
``SubQueueSummary`` values, every count in them the core's.

One core cycle stands for one tick of the device clock: records play at their ticks, frame and
sub-window ends strobe the core in the last tick of each, and the idle ticks between go as the
``warp`` of the next cycle. The core takes one insertion and one removal a cycle, and its
registers are read over the bus in cycles of their own (ticks in which the simulated design sees
no event), so a record that meets a taken cycle plays in the next free one: ``shifted`` counts
them and ``most_shifted`` says by how many ticks at most (on real hardware the design and the
bus run side by side and nothing waits). The items refused records stood for still play (one a
cycle, with the next kept record), and their frame says ``lossy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.aggregate.subqueue.gaps import MANTISSA_BITS, N_GAP_BINS, OCTAVES
from streamscope.aggregate.subqueue.reducer import MAX_FRAMES_PER_CALL, FrameEdges
from streamscope.aggregate.subqueue.summary import SubQueueSummary
from streamscope.core.records import State
from streamscope.hw.channel import ChannelMonitor
from streamscope.hw.link import Registers
from streamscope.hw.regmap import RegisterBank

I64 = NDArray[np.int64]

#: The core's configuration on an RTL device: counters of 32 bits (a 1 s frame of 7.5 ns ticks
#: is 1.3e8 of them), gaps up to 2**40 ticks, the host's own 337 gap bins.
COUNT_BITS = 32
GAP_BITS = 40
WARP_BITS = 40

# Record kinds, in the order they play within a tick: the producer's state first (the state at
# a tick is its latest record's), then the insertion, the removal, and the strobes that end the
# tick's cycle.
_STATE, _PUT, _GET, _WINDOW, _FRAME, _JUNK = range(6)
_BLOCKED_OUT = int(State.BLOCKED_OUT)


class CoreSubQueue:
    """``SubQueueFrames``'s interface over a simulated channel monitor core (see the module).
    ``levels``: the core's occupancy bins (the channel's capacity and one more: nothing
    saturates); ``sim``: ``amaranth`` or ``verilator``; ``log``: keep the insertions, removals
    and changes of the producer's state played, as ``(tick, kind)`` pairs in ``played`` (tests
    compare the core with the host's reducer on them). ``first_octave`` and ``octaves``: the
    core's gap bins (the host's own by default; fewer: the host's histograms hold the core's
    bins in place, the first and the last holding everything below and above them)."""

    def __init__(
        self,
        tick_ns: float = 1.0,
        *,
        states: bool = False,
        profile: int = 0,
        levels: int = 66,
        sim: str = "amaranth",
        log: bool = False,
        first_octave: int = 0,
        octaves: int = OCTAVES,
    ) -> None:
        from streamscope.hw.rtl import make_link

        if not tick_ns > 0.0:
            raise ValueError(f"tick_ns must be positive, got {tick_ns}")
        self.tick_ns = float(tick_ns)
        self._profile = int(profile)
        self._states = bool(states)
        self.core = ChannelMonitor(
            levels=levels, count_width=COUNT_BITS, frame_width=32, gap_width=GAP_BITS,
            tick_ns_q8=max(1, round(tick_ns * 256)), first_octave=first_octave, octaves=octaves,
            profile_bins=self._profile, production=self._states, warp_width=WARP_BITS,
        )  # fmt: skip
        self.bank = RegisterBank(self.core, self.core.EVENTS)
        self.link = make_link(self.bank, sim)
        self._regs = Registers(self.link, self.bank.registers)
        self._port = {name: getattr(self.bank, name) for name in self.core.EVENTS}
        self._edges = FrameEdges()
        self._next = 0  # the next frame to close
        self._chunks: list[tuple[I64, I64]] = []  # (ticks, kind) of records not played yet
        self._seq = {_PUT: 0, _GET: 0}  # the last item each end played
        self._top = {_PUT: 0, _GET: 0}  # the latest each end refused
        self._now: int | None = None  # the tick the next cycle stands for
        self._blocked = False
        self._lossy = False  # the running frame played items refused records stood for
        self._frames: list[tuple[int, int, int, int]] = []  # (frame, start, end, covered)
        self._finished = False
        #: Records played later than their tick (a cycle taken), and by how much at most.
        self.shifted = 0
        self.most_shifted = 0
        #: Frames read from the core; the cycles it ran (final once it has finished).
        self.frames_read = 0
        self.cycles = 0
        self.played: list[tuple[int, int]] | None = [] if log else None

    # -- input (SubQueueFrames's) -------------------------------------------------------------

    @property
    def grid(self) -> tuple[float, float] | None:
        e = self._edges
        return None if e.origin is None else (e.origin, e.period)

    def set_grid(self, origin_ticks: float, period_ticks: float) -> None:
        self._edges.set(origin_ticks, period_ticks, self._next)

    def _add(self, ticks: ArrayLike, seq: ArrayLike, kind: int) -> None:
        self._check_open()
        t = np.asarray(ticks, dtype=np.int64)
        s = np.asarray(seq, dtype=np.int64)
        if not t.size:
            return
        # Each record stands for the items since the end's last one (refused ones between).
        top = np.maximum.accumulate(np.concatenate(([self._seq[kind]], s)))
        items = np.diff(top)
        self._seq[kind] = int(top[-1])
        extra = items > 1
        reps = np.maximum(items, 0)
        kinds = np.full(int(reps.sum()), kind, np.int64)
        if extra.any():  # the refused items play before the record that follows them
            kinds[np.cumsum(reps)[extra] - reps[extra]] = kind + 10
        self._chunks.append((np.repeat(t, reps), kinds))

    def add_insertions(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._add(ticks, seq, _PUT)

    def add_removals(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._add(ticks, seq, _GET)

    def know_insertions(self, seq: int) -> None:
        self._top[_PUT] = max(self._top[_PUT], int(seq))

    def know_removals(self, seq: int) -> None:
        self._top[_GET] = max(self._top[_GET], int(seq))

    def add_states(self, ticks: ArrayLike, states: ArrayLike) -> None:
        """The producer's state records: the core sees it enter and leave BLOCKED_OUT."""
        self._check_open()
        if not self._states:
            raise ValueError("this core was built without production gaps (states=False)")
        t = np.asarray(ticks, dtype=np.int64)
        v = np.asarray(states, dtype=np.int64)
        self._chunks.append((t, np.where(v == _BLOCKED_OUT, _STATE + 20, _STATE)))

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError("this reducer has finished")

    # -- closing frames -----------------------------------------------------------------------

    def close_until(self, watermark_ticks: int) -> list[SubQueueSummary]:
        self._check_open()
        e = self._edges
        if e.origin is None:
            return []
        k1 = e.closable(int(watermark_ticks)) - 1
        if k1 <= self._next:
            return []
        if k1 - self._next > MAX_FRAMES_PER_CALL:
            raise ValueError(f"{k1 - self._next} frames to close in one call")
        bnd = e.bounds(self._next, k1)
        return self._close(bnd, bnd)

    def finish(self, end_ticks: int) -> list[SubQueueSummary]:
        self._check_open()
        out: list[SubQueueSummary] = []
        e = self._edges
        end = int(end_ticks)
        if e.origin is not None:
            for kind in (_PUT, _GET):  # items refused after each end's last kept record
                if self._top[kind] > self._seq[kind]:
                    self._add([end - 1], [self._top[kind]], kind)
            j = e.closable(end)
            if j - 1 >= self._next and end >= e.bound(self._next):
                k1 = j - 1 if end == e.bound(j - 1) else j
                if k1 > self._next:
                    grid = e.bounds(self._next, k1)
                    seg = grid.copy()
                    seg[-1] = min(int(grid[-1]), end)
                    out = self._close(seg, grid)
        self._finished = True
        self._chunks = []
        self.cycles = self.link.cycles
        self.link.close()
        return out

    @property
    def stats(self) -> dict[str, int]:
        """What the core did: cycles, frames, records shifted and by how much at most."""
        return {"cycles": self.cycles, "frames": self.frames_read, "shifted": self.shifted,
                "most_shifted": self.most_shifted}  # fmt: skip

    def close(self) -> None:
        """Stop the simulation (``finish`` does)."""
        self.link.close()

    def _close(self, seg: I64, grid: I64) -> list[SubQueueSummary]:
        """Play every record below ``seg[-1]`` with the strobes of frames ``_next ..`` (frame
        ``j`` covers ``[seg[j], seg[j+1])`` of grid frame ``[grid[j], grid[j+1])``), reading
        each frame from the core as it ends."""
        limit = int(seg[-1])
        t = np.concatenate([c[0] for c in self._chunks]) if self._chunks else np.zeros(0, np.int64)
        k = np.concatenate([c[1] for c in self._chunks]) if self._chunks else t
        now = t < limit
        self._chunks = [(t[~now], k[~now])] if (~now).any() else []
        t, k = t[now], k[now]
        strobes_t, strobes_k = [], []
        if self._now is None:
            # The first cycle: the first record's, or the one before the grid's first frame;
            # what came before the grid (the link's own cycles too) is latched, not read.
            self._now = min(int(t.min()) if t.size else limit, int(seg[0]) - 1)
            strobes_t.append(int(seg[0]) - 1)
            strobes_k.append(_JUNK)
        for j in range(seg.size - 1):
            lo, hi, span = int(seg[j]), int(seg[j + 1]), int(grid[j + 1] - grid[j])
            if self._profile:
                starts = lo + (np.arange(1, self._profile, dtype=np.int64) * span) // self._profile
                ends = starts[(starts > lo) & (starts < hi)] - 1
                strobes_t += ends.tolist()
                strobes_k += [_WINDOW] * ends.size
            strobes_t.append(hi - 1)
            strobes_k.append(_FRAME)
            self._frames.append((self._next + j, int(grid[j]), int(grid[j + 1]), hi - lo))
        t = np.concatenate((t, np.array(strobes_t, np.int64)))
        k = np.concatenate((k, np.array(strobes_k, np.int64)))
        order = np.lexsort((k % 10, t))  # (a refused item's +10 and BLOCKED_OUT's +20 apart)
        out: list[SubQueueSummary] = []
        self._play(t[order].tolist(), k[order].tolist(), out)
        self._next += seg.size - 1
        return out

    # -- the core -----------------------------------------------------------------------------

    def _play(self, ticks: list[int], kinds: list[int], out: list[SubQueueSummary]) -> None:
        p = self._port
        rows: list[list[tuple[Any, int]]] = []
        n, i = len(ticks), 0
        while i < n:
            assert self._now is not None
            c = max(ticks[i], self._now)
            put = get = window = frame = junk = 0
            blocked = self._blocked
            j = i
            while j < n and ticks[j] <= c:
                kind = kinds[j]
                base = kind % 10
                if base == _STATE:
                    blocked = kind >= 20
                elif base in (_PUT, _GET):
                    if (put if base == _PUT else get) or window or frame or junk:
                        break
                    if base == _PUT:
                        put = 1
                    else:
                        get = 1
                    if kind >= 10:
                        self._lossy = True
                    if ticks[j] < c:
                        self.shifted += 1
                        self.most_shifted = max(self.most_shifted, c - ticks[j])
                elif base == _WINDOW:
                    if window or frame or junk:
                        break
                    window = 1
                else:
                    if frame or junk:
                        break
                    frame, junk = (1, 0) if base == _FRAME else (0, 1)
                j += 1
            warp = c - self._now
            if (window or frame or junk) and warp:
                # The idle ticks before a strobe go in a cycle of their own.
                rows.append([(p["warp"], warp - 1)] if warp > 1 else [])
                warp = 0
            row: list[tuple[Any, int]] = []
            if warp:
                row.append((p["warp"], warp))
            for name, value in (("put", put), ("get", get), ("window_end", window),
                                ("frame_end", frame or junk)):  # fmt: skip
                if value:
                    row.append((p[name], 1))
            if blocked != self._blocked:
                row.append((p["block" if blocked else "unblock"], 1))
            rows.append(row)
            if self.played is not None:
                self.played += [(c, kinds[x] % 10) for x in range(i, j)
                                if kinds[x] % 10 in (_PUT, _GET)]  # fmt: skip
                if blocked != self._blocked:
                    self.played.append((c, _STATE + 20 * blocked))
            self._blocked = blocked
            self._now = c + 1
            i = j
            if frame or junk:
                self.link.play(rows)
                rows = []
                before = self.link.cycles
                got = self._read() if frame else None
                if junk:
                    self._lossy = False  # (items before the grid: in no frame)
                self._now += self.link.cycles - before  # the bus's cycles: ticks gone by
                if got is not None:
                    out.append(got)
        self.link.play(rows)

    def _read(self) -> SubQueueSummary:
        """The frame the core just latched, read over the link."""
        frame, start, end, covered = self._frames.pop(0)
        get = self._regs.get
        occ = np.array([get(f"occupancy[{k}]") for k in range(self.core.levels)], np.int64)
        held = np.flatnonzero(occ)
        bins = self.core.gap_bins

        regs, core = self._regs, self.core

        def hist(name: str, n: int) -> I64:
            """The entries the bitmap marks, each through ``read_at`` and ``read_data``."""
            out = np.zeros(n, np.int64)
            bits = get(f"nonzero_{name}")
            while bits:
                j = (bits & -bits).bit_length() - 1
                bits &= bits - 1
                regs.set("read_at", core.address(name, j))
                out[j] = get("read_data")
            return out

        lo = core.first_octave << MANTISSA_BITS

        def gaps(name: str) -> I64:
            out = np.zeros(N_GAP_BINS, np.int64)
            out[lo : lo + bins] = hist(name, bins)
            return out

        lossy, self._lossy = self._lossy, False
        self.frames_read += 1
        return SubQueueSummary(
            frame=frame,
            start_ticks=start,
            end_ticks=end,
            covered_ticks=covered,
            n_in=get("n_in"),
            n_out=get("n_out"),
            level_start=get("level_start"),
            level_ticks=occ[: int(held[-1]) + 1] if held.size else occ[:1],
            gap_in=gaps("gap_in"),
            gap_out=gaps("gap_out"),
            gap_prod=gaps("gap_prod") if self._states else None,
            tick_ns=self.tick_ns,
            lossy=lossy,
            profile=hist("profile_in", self._profile) if self._profile else None,
            profile_out=hist("profile_out", self._profile) if self._profile else None,
        )
