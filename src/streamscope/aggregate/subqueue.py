"""Per-frame reduction of one sub-queue of a virtual queue, where its records are made.

In: the insertion and removal records of one sub-queue (both ends stamped by the same clock, in
raw ticks of nominal period ``tick_ns``), optionally the producer stage's state records, and a
frame grid in those ticks. Out: one small :class:`SubQueueSummary` per frame (time at each level,
counts, fixed-edge histograms of inter-insertion, back-to-back inter-departure and production
gaps and, where asked, the insertions and the removals per equal sub-window of the frame: its
profiles), with a compact binary form, so a device can send summaries instead of records.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.core.errors import StreamscopeError
from streamscope.core.records import State

__all__ = [
    "GAP_EDGES_NS",
    "N_GAP_BINS",
    "PROFILE_BINS",
    "SubQueueFrames",
    "SubQueueSummary",
    "SummaryFormatError",
    "decode_summaries",
    "encode_summaries",
    "gap_bins",
    "gap_edges_ns",
]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

#: Fixed edges (ns) of every gap histogram: 0, then 2**(i/8) for i = 0..336 (1 ns .. ~4.4e12 ns).
GAP_EDGES_NS: F64 = np.concatenate(([0.0], 2.0 ** (np.arange(8 * 42 + 1, dtype=np.float64) / 8)))
GAP_EDGES_NS.setflags(write=False)
N_GAP_BINS = len(GAP_EDGES_NS) - 1

GapKind = Literal["gap_in", "gap_out", "gap_prod"]

#: Sub-windows of the insertion profile that virtual queues ask for (1/128 of a 1 s frame is
#: ~8 ms, a few service times of the micro-benchmarks; of a 200 ms frame, ~1.6 ms).
PROFILE_BINS = 128
#: The most sub-windows a profile may have (its bins are stored as <u2).
MAX_PROFILE_BINS = 65535

#: The most frames one call may close (a runaway watermark must not build an endless list).
MAX_FRAMES_PER_CALL = 1_000_000

_BLOCKED_OUT = int(State.BLOCKED_OUT)


class SummaryFormatError(StreamscopeError, ValueError):
    """Bytes that are not a well-formed sub-queue summary (truncated, corrupt or another version)."""


def gap_edges_ns(scale: float = 1.0) -> F64:
    """The fixed gap-histogram edges in ns, each multiplied by ``scale`` (a clock-rate correction)."""
    if not (math.isfinite(scale) and scale > 0.0):
        raise ValueError(f"scale must be a finite positive number, got {scale}")
    out: F64 = GAP_EDGES_NS * float(scale)
    return out


def gap_bins(d_ns: ArrayLike) -> I64:
    """Bin of each duration (ns) among :data:`GAP_EDGES_NS`; longer ones go in the last bin."""
    d = np.asarray(d_ns, dtype=np.float64)
    idx = np.searchsorted(GAP_EDGES_NS, d, side="right") - 1
    out: I64 = np.clip(idx, 0, N_GAP_BINS - 1).astype(np.int64)
    return out


# --------------------------------------------------------------------------------------------
# The summary and its binary form
# --------------------------------------------------------------------------------------------

_MAGIC = b"SSQF"
#: Version 1: no profile; version 2 (written only for a summary with profiles): version 1's
#: header, then ``_HEAD2``, and the two profiles after the histograms. Readers take both.
_VERSION = 1
_VERSION_PROFILE = 2
_FLAG_LOSSY = 1
_FLAG_PROD = 2
_FLAG_PROFILE = 4
#: magic, version, flags, frame, start, end, covered, n_in, n_out, level_start, tick_ns,
#: then the lengths of level_ticks and of the three sparse histograms.
_HEAD = struct.Struct("<4sHHqqqqqqqdIIII")
_PAIR = 2 + 8  # one sparse histogram entry: <u2 bin, <i8 count (stored as two columns)
#: version 2: the profiles' number of sub-windows and of each one's stored (non-zero) entries.
_HEAD2 = struct.Struct("<III")

_BATCH_MAGIC = b"SSQB"
_BATCH_VERSION = 1
#: magic, version, reserved, key, number of summaries; each summary is then <u4 length + bytes.
_BATCH_HEAD = struct.Struct("<4sHHqI")
_LEN = struct.Struct("<I")


def _sparse(h: I64, limit: int = N_GAP_BINS) -> tuple[bytes, bytes, int]:
    nz = np.flatnonzero(h)
    if nz.size and int(nz[-1]) >= limit:
        raise ValueError(f"a gap histogram has {h.size} bins; at most {limit} can be stored")
    return nz.astype("<u2").tobytes(), h[nz].astype("<i8").tobytes(), int(nz.size)


def _read_sparse(data: bytes, pos: int, n: int, size: int) -> tuple[I64, int]:
    """A dense array of ``size`` from ``n`` sparse entries at ``pos``, and the position after."""
    bins = np.frombuffer(data, dtype="<u2", count=n, offset=pos).astype(np.int64)
    pos += 2 * n
    counts = np.frombuffer(data, dtype="<i8", count=n, offset=pos).astype(np.int64)
    pos += 8 * n
    if n and (
        int(bins[-1]) >= size or bool(np.any(np.diff(bins) <= 0)) or bool(np.any(counts <= 0))
    ):
        raise SummaryFormatError("corrupt sparse histogram")
    h = np.zeros(size, dtype=np.int64)
    h[bins] = counts
    return h, pos


@dataclass(frozen=True, eq=False)
class SubQueueSummary:
    """One frame of one sub-queue, in its own clock's ticks.

    ``level_ticks[i]`` is the ticks spent at level ``i`` within ``[start_ticks, start_ticks +
    covered_ticks)`` (it sums to ``covered_ticks``). The gap histograms count gaps in nominal ns
    (ticks * ``tick_ns``) over the fixed bins of :data:`GAP_EDGES_NS`; ``gap_prod`` is ``None``
    when the producer's states were not tracked.

    ``profile`` (``None`` unless the reducer was asked for one): the insertions in each of its
    ``len(profile)`` equal sub-windows of ``[start_ticks, end_ticks)`` (sub-window ``i`` starts
    at ``start_ticks + (i * span) // len(profile)``); it sums to ``n_in``. ``profile_out``: the
    removals in the same sub-windows (sums to ``n_out``); both or neither. Items whose records
    were refused count where the next kept record of their end lies. (The virtual-queue model
    draws its insertions from ``profile``; ``profile_out`` is summarised beside it for checks
    and estimates that follow the consumer's removals, which the model does not make yet.)
    """

    frame: int
    start_ticks: int
    end_ticks: int
    covered_ticks: int
    n_in: int
    n_out: int
    level_start: int
    level_ticks: I64
    gap_in: I64
    gap_out: I64
    gap_prod: I64 | None
    tick_ns: float
    lossy: bool
    profile: I64 | None = None
    profile_out: I64 | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SubQueueSummary):
            return NotImplemented
        scalars = (
            "frame",
            "start_ticks",
            "end_ticks",
            "covered_ticks",
            "n_in",
            "n_out",
            "level_start",
            "tick_ns",
            "lossy",
        )
        if any(getattr(self, n) != getattr(other, n) for n in scalars):
            return False
        if (self.gap_prod is None) != (other.gap_prod is None):
            return False
        for mine, theirs in ((self.profile, other.profile),
                             (self.profile_out, other.profile_out)):  # fmt: skip
            if (mine is None) != (theirs is None):
                return False
        pairs: list[tuple[Any, Any]] = [
            (self.level_ticks, other.level_ticks),
            (self.gap_in, other.gap_in),
            (self.gap_out, other.gap_out),
            (self.gap_prod, other.gap_prod),
            (self.profile, other.profile),
            (self.profile_out, other.profile_out),
        ]
        return all(a is None or np.array_equal(a, b) for a, b in pairs)

    __hash__ = None  # type: ignore[assignment]  # holds arrays: equal by value, not hashable

    def histogram(self, which: GapKind, scale: float = 1.0) -> tuple[F64, F64] | None:
        """``(edges_ns, weights)`` over the non-empty range of bins of one gap histogram, ready
        to sample; ``None`` when it holds no gap (or, for "gap_prod", was not tracked).

        ``which``: "gap_in" (inter-insertion), "gap_out" (back-to-back inter-departure) or
        "gap_prod" (production). ``scale`` multiplies the edges (nominal ns -> corrected ns).
        ``len(edges) == len(weights) + 1``; the first and last weights are positive.
        """
        if which not in ("gap_in", "gap_out", "gap_prod"):
            raise ValueError(f"which must be 'gap_in', 'gap_out' or 'gap_prod', got {which!r}")
        h: I64 | None = getattr(self, which)
        edges = gap_edges_ns(scale)
        if h is None:
            return None
        nz = np.flatnonzero(h)
        if not nz.size:
            return None
        lo, hi = int(nz[0]), int(nz[-1])
        return edges[lo : hi + 2].copy(), h[lo : hi + 1].astype(np.float64)

    def to_bytes(self) -> bytes:
        """Fixed little-endian layout: a header, ``level_ticks``, then each histogram sparsely
        (and, in version 2, the profiles' size in the header and their entries last)."""
        lt = np.asarray(self.level_ticks, dtype="<i8")
        parts = [_sparse(np.asarray(h, dtype=np.int64)) for h in (self.gap_in, self.gap_out)]
        has_prod = self.gap_prod is not None
        parts.append(
            _sparse(np.asarray(self.gap_prod, dtype=np.int64)) if has_prod else (b"", b"", 0)
        )
        flags = (_FLAG_LOSSY if self.lossy else 0) | (_FLAG_PROD if has_prod else 0)
        extra = b""
        if (self.profile is None) != (self.profile_out is None):
            raise ValueError("a summary has both profiles (insertions, removals) or neither")
        if self.profile is not None and self.profile_out is not None:
            p_in = np.asarray(self.profile, dtype=np.int64)
            p_out = np.asarray(self.profile_out, dtype=np.int64)
            if not (
                1 <= p_in.size <= MAX_PROFILE_BINS
                and p_out.size == p_in.size
                and not bool(np.any(p_in < 0) or np.any(p_out < 0))
            ):
                raise ValueError(
                    f"profiles need 1..{MAX_PROFILE_BINS} sub-windows (both alike) of counts >= 0"
                )
            sp_in, sp_out = _sparse(p_in, p_in.size), _sparse(p_out, p_out.size)
            parts += [sp_in, sp_out]
            flags |= _FLAG_PROFILE
            extra = _HEAD2.pack(p_in.size, sp_in[2], sp_out[2])
        head = _HEAD.pack(
            _MAGIC,
            _VERSION_PROFILE if extra else _VERSION,
            flags,
            self.frame,
            self.start_ticks,
            self.end_ticks,
            self.covered_ticks,
            self.n_in,
            self.n_out,
            self.level_start,
            self.tick_ns,
            lt.size,
            parts[0][2],
            parts[1][2],
            parts[2][2],
        )
        return b"".join([head, extra, lt.tobytes(), *(p for b, c, _ in parts for p in (b, c))])

    @classmethod
    def from_bytes(cls, b: bytes) -> SubQueueSummary:
        """The summary that :meth:`to_bytes` wrote, or :class:`SummaryFormatError`."""
        data = bytes(b)
        if len(data) < _HEAD.size:
            raise SummaryFormatError(f"truncated summary: {len(data)} of {_HEAD.size} header bytes")
        fields = _HEAD.unpack_from(data)
        magic, version, flags, frame, start, end, covered, n_in, n_out, level_start = fields[:10]
        tick_ns, n_lt, n_gi, n_go, n_gp = fields[10:]
        if magic != _MAGIC:
            raise SummaryFormatError(f"bad magic {magic!r}: not a sub-queue summary")
        if version not in (_VERSION, _VERSION_PROFILE):
            raise SummaryFormatError(
                f"summary version {version}, this reader knows {_VERSION} and {_VERSION_PROFILE}"
            )
        if flags & ~(_FLAG_LOSSY | _FLAG_PROD | _FLAG_PROFILE):
            raise SummaryFormatError(f"unknown summary flags {flags:#x}")
        has_prod = bool(flags & _FLAG_PROD)
        if not has_prod and n_gp:
            raise SummaryFormatError("production gaps present but not flagged")
        has_profile = bool(flags & _FLAG_PROFILE)
        if has_profile != (version == _VERSION_PROFILE):
            raise SummaryFormatError(f"a version {version} summary with flags {flags:#x}")
        n_prof, n_pe, n_po = 0, 0, 0
        pos = _HEAD.size
        if has_profile:
            if len(data) < _HEAD.size + _HEAD2.size:
                raise SummaryFormatError("truncated summary: the profiles' header is cut short")
            n_prof, n_pe, n_po = _HEAD2.unpack_from(data, pos)
            pos += _HEAD2.size
            if not (1 <= n_prof <= MAX_PROFILE_BINS and n_pe <= n_prof and n_po <= n_prof):
                raise SummaryFormatError(
                    f"profiles of {n_prof} sub-windows, {n_pe} and {n_po} stored"
                )
        want = pos + 8 * n_lt + _PAIR * (n_gi + n_go + n_gp + n_pe + n_po)
        if len(data) != want:
            raise SummaryFormatError(f"summary of {len(data)} bytes, its header says {want}")
        if frame < 0 or not (0 <= covered <= end - start):
            raise SummaryFormatError(
                f"inconsistent frame {frame}: [{start}, {end}) with {covered} ticks covered"
            )
        if n_in < 0 or n_out < 0 or level_start < 0:
            raise SummaryFormatError("negative count or level in summary")
        if not (math.isfinite(tick_ns) and tick_ns > 0.0):
            raise SummaryFormatError(f"tick_ns must be finite and positive, got {tick_ns}")
        lt = np.frombuffer(data, dtype="<i8", count=n_lt, offset=pos).astype(np.int64)
        pos += 8 * n_lt
        if n_lt < 1 or bool(np.any(lt < 0)) or sum(lt.tolist()) != covered:
            raise SummaryFormatError("level_ticks must be >= 0 and sum to covered_ticks")
        if n_lt > 1 and lt[-1] == 0:
            raise SummaryFormatError("level_ticks has untrimmed trailing zeros")
        hists: list[I64] = []
        for n in (n_gi, n_go, n_gp):
            h, pos = _read_sparse(data, pos, n, N_GAP_BINS)
            hists.append(h)
        profile = profile_out = None
        if has_profile:
            profile, pos = _read_sparse(data, pos, n_pe, n_prof)
            profile_out = _read_sparse(data, pos, n_po, n_prof)[0]
        return cls(
            frame=frame,
            start_ticks=start,
            end_ticks=end,
            covered_ticks=covered,
            n_in=n_in,
            n_out=n_out,
            level_start=level_start,
            level_ticks=lt,
            gap_in=hists[0],
            gap_out=hists[1],
            gap_prod=hists[2] if has_prod else None,
            tick_ns=tick_ns,
            lossy=bool(flags & _FLAG_LOSSY),
            profile=profile,
            profile_out=profile_out,
        )


def encode_summaries(key: int, summaries: Iterable[SubQueueSummary]) -> bytes:
    """One message body: ``key`` (which sub-queue; the caller decides its meaning) and summaries."""
    bodies = [s.to_bytes() for s in summaries]
    out = [_BATCH_HEAD.pack(_BATCH_MAGIC, _BATCH_VERSION, 0, key, len(bodies))]
    for body in bodies:
        out += [_LEN.pack(len(body)), body]
    return b"".join(out)


def decode_summaries(b: bytes) -> tuple[int, list[SubQueueSummary]]:
    """``(key, summaries)`` from :func:`encode_summaries`'s bytes, or :class:`SummaryFormatError`."""
    data = bytes(b)
    if len(data) < _BATCH_HEAD.size:
        raise SummaryFormatError(f"truncated summaries: {len(data)} of {_BATCH_HEAD.size} bytes")
    magic, version, reserved, key, count = _BATCH_HEAD.unpack_from(data)
    if magic != _BATCH_MAGIC:
        raise SummaryFormatError(f"bad magic {magic!r}: not a batch of sub-queue summaries")
    if version != _BATCH_VERSION or reserved:
        raise SummaryFormatError(
            f"summary batch version {version}, this reader knows {_BATCH_VERSION}"
        )
    if count * (_LEN.size + _HEAD.size) > len(data) - _BATCH_HEAD.size:
        raise SummaryFormatError(f"{count} summaries cannot fit in {len(data)} bytes")
    pos = _BATCH_HEAD.size
    out: list[SubQueueSummary] = []
    for _ in range(count):
        if pos + _LEN.size > len(data):
            raise SummaryFormatError("truncated summaries: a length is missing")
        (n,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if pos + n > len(data):
            raise SummaryFormatError("truncated summaries: a summary is cut short")
        out.append(SubQueueSummary.from_bytes(data[pos : pos + n]))
        pos += n
    if pos != len(data):
        raise SummaryFormatError(f"{len(data) - pos} stray bytes after the summaries")
    return key, out


# --------------------------------------------------------------------------------------------
# The streaming reducer
# --------------------------------------------------------------------------------------------


class _Pending:
    """(ticks, value) chunks of one record kind not yet folded into frames.

    Chunks should come in time order; if they do not, the records are sorted (stably) before
    they are folded, rather than refused: a monitor must not fail on a misordered drain.
    """

    __slots__ = ("last", "name", "ordered", "t", "v")

    def __init__(self, name: str) -> None:
        self.name = name
        self.t: list[I64] = []
        self.v: list[I64] = []
        self.last: int | None = None
        self.ordered = True

    def add(self, ticks: ArrayLike, values: ArrayLike) -> None:
        t = np.asarray(ticks).reshape(-1)
        v = np.asarray(values).reshape(-1)
        if t.dtype.kind not in "iu" or v.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: ticks and values must be integer arrays")
        if t.shape != v.shape:
            raise ValueError(f"{self.name}: {t.size} ticks but {v.size} values")
        if not t.size:
            return
        t = t.astype(np.int64)
        if bool(np.any(np.diff(t) < 0)) or (self.last is not None and int(t[0]) < self.last):
            self.ordered = False
        self.t.append(t)
        self.v.append(v.astype(np.int64))
        self.last = int(t[-1]) if self.last is None else max(self.last, int(t.max()))

    def take(self, limit: int) -> tuple[I64, I64]:
        """The records with ticks < ``limit``; the rest stay."""
        if not self.t:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t = np.concatenate(self.t) if len(self.t) > 1 else self.t[0]
        v = np.concatenate(self.v) if len(self.v) > 1 else self.v[0]
        if not self.ordered:
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
            self.ordered = True
        n = int(np.searchsorted(t, limit, side="left"))
        self.t = [t[n:]] if n < t.size else []
        self.v = [v[n:]] if n < t.size else []
        return t[:n], v[:n]

    def clear(self) -> None:
        self.t, self.v = [], []

    def top(self, limit: int) -> int:
        """The largest value held of a record with ticks < ``limit`` (0 if none)."""
        return max(
            (int(v[t < limit].max(initial=0)) for t, v in zip(self.t, self.v, strict=True)),
            default=0,
        )

    def __len__(self) -> int:
        return sum(c.size for c in self.t)


def _jumped_frames(seq: I64, prev0: int, fr: I64, nf: int) -> NDArray[np.bool_]:
    """Frames (of ``nf``) holding a record whose sequence number does not follow the one before."""
    prev = np.concatenate(([prev0], seq[:-1]))
    f = fr[(seq != prev + 1) & (fr >= 0)]
    out: NDArray[np.bool_] = np.bincount(f, minlength=nf)[:nf] > 0
    return out


def _sub_windows(t: I64, fr: I64, grid: I64, k: int) -> I64:
    """The profile sub-window (of ``k``) of each record: sub-window ``i`` of a frame starts at
    ``(i * span) // k`` ticks into it (records of no frame get a meaningless one)."""
    f = np.maximum(fr, 0)
    span = np.maximum(grid[f + 1] - grid[f], 1)
    out: I64 = ((t - grid[f] + 1) * k - 1) // span
    return out


def _count(sub: I64, weights: I64, k: int) -> I64:
    out: I64 = np.rint(np.bincount(sub, weights=weights, minlength=k)).astype(np.int64)
    return out


def _frame_slices(fr: I64, nf: int) -> I64:
    """Start offsets of frames ``0..nf`` in a non-decreasing frame array (``-1`` entries first)."""
    out: I64 = np.searchsorted(fr, np.arange(nf + 1), side="left").astype(np.int64)
    return out


class SubQueueFrames:
    """Streaming per-frame reducer of one sub-queue (both of its ends in this clock).

    Feed time-ordered chunks with :meth:`add_insertions`, :meth:`add_removals` and (optionally)
    :meth:`add_states` in any interleaving, then :meth:`close_until` a watermark: every record
    with ticks below it must have been added by then. Frames are only closed once a grid is set
    (:meth:`set_grid`); records before the grid's origin belong to no frame but still move the
    level. The values of insertion and removal records are the 1-based item sequence numbers at
    that end; the level is ``last insertion seq - last removal seq`` (FIFO, at least 0), exact at
    every kept record even when records were refused. A frame holding a record whose sequence
    number jumped is flagged ``lossy``; the missing items count in that frame's ``n_in`` /
    ``n_out``, and gaps next to a jump are not counted. Memory holds the records not
    yet closed and the insertion times of the items still in the sub-queue.

    With ``states=True`` (or once :meth:`add_states` has been called) summaries carry production
    gaps: each inter-insertion gap less the producer's time in BLOCKED_OUT between the two
    insertions. With ``profile=K`` (``1..MAX_PROFILE_BINS``; 0: none) they carry the insertions
    and the removals in each of ``K`` equal sub-windows of the frame (see
    :class:`SubQueueSummary`).
    """

    def __init__(self, tick_ns: float = 1.0, *, states: bool = False, profile: int = 0) -> None:
        if not (math.isfinite(tick_ns) and tick_ns > 0.0):
            raise ValueError(f"tick_ns must be a finite positive number, got {tick_ns}")
        if int(profile) != profile or not 0 <= profile <= MAX_PROFILE_BINS:
            raise ValueError(f"profile must be an integer in 0..{MAX_PROFILE_BINS}, got {profile}")
        self.tick_ns = float(tick_ns)
        self._profile = int(profile)
        self._with_states = bool(states)
        self._origin: float | None = None
        self._period = 0.0
        self._pin: tuple[int, int] | None = None  # (frame, start tick) kept across a re-grid
        self._next = 0  # the next frame to close
        self._cursor: int | None = None  # records below this are folded (start of frame _next)
        self._finished = False
        self._ins = _Pending("insertions")
        self._rem = _Pending("removals")
        self._st = _Pending("states")
        # folded state
        self._I = 0  # last insertion seq
        self._R = 0  # last removal seq
        self._ins_t: int | None = None  # ticks of the last insertion record
        self._ins_c = 0  # producer's cumulative BLOCKED_OUT ticks at that insertion
        self._rem_t: int | None = None
        self._state = int(State.IDLE)
        self._state_t = 0
        self._blocked = 0  # cumulative BLOCKED_OUT ticks at _state_t
        self._live_seq = np.zeros(0, np.int64)  # items inserted and not yet removed
        self._live_t = np.zeros(0, np.int64)
        # The latest sequence numbers each end refused: what no kept record accounts for at the
        # end of the run is still counted, in the last frame.
        self._top_in = 0
        self._top_out = 0

    # -- input ------------------------------------------------------------------------------

    @property
    def grid(self) -> tuple[float, float] | None:
        """``(origin_ticks, period_ticks)`` once set."""
        return None if self._origin is None else (self._origin, self._period)

    @property
    def pending(self) -> int:
        """Records added and not yet folded into closed frames."""
        return len(self._ins) + len(self._rem) + len(self._st)

    @property
    def in_queue(self) -> int:
        """Items whose insertion times are held (inserted, not yet removed, as folded so far)."""
        return int(self._live_seq.size)

    def set_grid(self, origin_ticks: float, period_ticks: float) -> None:
        """Frame ``k >= 0`` covers ``[round(origin + k*period), round(origin + (k+1)*period))``.

        May be called again with a refined grid (a better clock fit): frames already closed keep
        their edges, the next one starts where the last closed one ended and ends on the new
        grid, and every later one lies on the new grid.
        """
        if not (math.isfinite(origin_ticks) and math.isfinite(period_ticks)):
            raise ValueError("grid origin and period must be finite")
        if period_ticks < 1.0:
            raise ValueError(f"period_ticks must be at least 1 tick, got {period_ticks}")
        if self._origin is not None:
            self._pin = (self._next, self._bound(self._next))
        self._origin = float(origin_ticks)
        self._period = float(period_ticks)
        if self._pin is not None and self._raw_bound(self._pin[0] + 1) <= self._pin[1]:
            raise ValueError("a refined grid may not end the next frame before it starts")

    def add_insertions(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._check_open()
        self._ins.add(ticks, seq)

    def add_removals(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._check_open()
        self._rem.add(ticks, seq)

    def know_insertions(self, seq: int) -> None:
        """Insertion ``seq`` happened (its record was refused)."""
        self._top_in = max(self._top_in, int(seq))

    def know_removals(self, seq: int) -> None:
        """Removal ``seq`` happened (its record was refused)."""
        self._top_out = max(self._top_out, int(seq))

    def add_states(self, ticks: ArrayLike, states: ArrayLike) -> None:
        """The producer stage's state records (value = new :class:`State`)."""
        self._check_open()
        self._with_states = True
        self._st.add(ticks, states)

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError("this reducer has finished")

    # -- closing frames ---------------------------------------------------------------------

    def _raw_bound(self, k: int) -> int:
        assert self._origin is not None
        return math.floor(self._origin + k * self._period + 0.5)

    def _bound(self, k: int) -> int:
        if self._pin is not None and k == self._pin[0]:
            return self._pin[1]
        return self._raw_bound(k)

    def _bounds(self, k0: int, k1: int) -> I64:
        """Boundaries of frames ``k0..k1-1``: ``k1 - k0 + 1`` ticks."""
        assert self._origin is not None
        k = np.arange(k0, k1 + 1, dtype=np.float64)
        out: I64 = np.floor(self._origin + k * self._period + 0.5).astype(np.int64)
        if self._pin is not None and k0 <= self._pin[0] <= k1:
            out[self._pin[0] - k0] = self._pin[1]
        return out

    def _closable(self, watermark: int) -> int:
        """The number ``j`` of grid boundaries ``b(0..j-1)`` at or before ``watermark``."""
        assert self._origin is not None
        j = math.floor((watermark - self._origin) / self._period) + 1
        j = max(j, 0)
        while j > 0 and self._bound(j - 1) > watermark:
            j -= 1
        while self._bound(j) <= watermark:
            j += 1
        return j

    def close_until(self, watermark_ticks: int) -> list[SubQueueSummary]:
        """Every frame ending at or before ``watermark_ticks`` not closed yet, in order."""
        self._check_open()
        if self._origin is None:
            return []
        k1 = self._closable(int(watermark_ticks)) - 1  # frames _next..k1-1 end by the watermark
        if k1 <= self._next:
            return []
        self._check_count(k1 - self._next)
        bnd = self._bounds(self._next, k1)
        return self._fold(bnd, bnd)

    def finish(self, end_ticks: int) -> list[SubQueueSummary]:
        """Close everything up to ``end_ticks`` (the last frame partial); records at or after it
        are dropped. No frames without a grid."""
        self._check_open()
        self._finished = True
        out: list[SubQueueSummary] = []
        if self._origin is not None:
            end = int(end_ticks)
            # Items refused after each end's last kept record: one record that accounts for
            # them all, just before the end (its frame is lossy; no gap next to it counts).
            for pend, top, last in (
                (self._ins, self._top_in, self._I),
                (self._rem, self._top_out, self._R),
            ):
                if top > max(last, pend.top(end)):
                    at = max(end - 1, self._cursor or 0)
                    pend.add(np.array([at], np.int64), np.array([top], np.int64))
            j = self._closable(end)  # b(j-1) <= end < b(j)
            if j - 1 >= self._next and end >= self._bound(self._next):
                k1 = j - 1 if end == self._bound(j - 1) else j  # frames _next..k1-1
                if k1 > self._next:
                    self._check_count(k1 - self._next)
                    grid = self._bounds(self._next, k1)
                    seg = grid.copy()
                    seg[-1] = min(int(grid[-1]), end)
                    out = self._fold(seg, grid)
        for p in (self._ins, self._rem, self._st):
            p.clear()
        self._live_seq = self._live_seq[:0]
        self._live_t = self._live_t[:0]
        return out

    @staticmethod
    def _check_count(n: int) -> None:
        if n > MAX_FRAMES_PER_CALL:
            raise ValueError(
                f"{n} frames to close in one call (at most {MAX_FRAMES_PER_CALL}); "
                "is the watermark an end marker? use finish()"
            )

    def _fold(self, seg: I64, grid: I64) -> list[SubQueueSummary]:
        """Fold every record below ``seg[-1]`` into frames ``_next ..``; frame ``j`` covers
        ``[seg[j], seg[j+1])`` of grid frame ``[grid[j], grid[j+1])``."""
        nf = seg.size - 1
        limit = int(seg[-1])
        ins_t, ins_s = self._ins.take(limit)
        rem_t, rem_s = self._rem.take(limit)
        st_t, st_v = self._st.take(limit)
        if self._cursor is not None:
            # Records below the cursor broke the watermark contract: count them in this frame.
            ins_t = np.maximum(ins_t, self._cursor)
            rem_t = np.maximum(rem_t, self._cursor)
            st_t = np.maximum(st_t, self._cursor)
        starts = seg[:-1]

        def frame_of(t: I64) -> I64:
            out: I64 = np.searchsorted(seg, t, side="right") - 1
            return out

        ni, nr = ins_t.size, rem_t.size
        # ---- level over time: events plus frame starts (ordered first at equal ticks) -------
        t_all = np.concatenate((ins_t, rem_t, starts))
        prio = np.concatenate(
            (np.zeros(ni, np.int64), np.ones(nr, np.int64), np.full(nf, -1, np.int64))
        )
        order = np.lexsort((prio, t_all))
        t_sorted = t_all[order]
        zeros_i, zeros_r = np.zeros(ni, np.int64), np.zeros(nr, np.int64)
        zeros_f = np.zeros(nf, np.int64)
        i_val = np.concatenate(([self._I], ins_s, zeros_r, zeros_f))
        r_val = np.concatenate(([self._R], zeros_i, rem_s, zeros_f))
        perm = np.concatenate(([0], order + 1))
        i_after = np.maximum.accumulate(i_val[perm])[1:]
        r_after = np.maximum.accumulate(r_val[perm])[1:]
        level = np.maximum(i_after - r_after, 0)
        dur = np.diff(np.append(t_sorted, limit))
        seg_fr = frame_of(t_sorted)
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        bpos = inv[ni + nr :]
        i_end = int(i_after[-1]) if i_after.size else self._I
        r_end = int(r_after[-1]) if r_after.size else self._R
        n_in = np.diff(np.append(i_after[bpos], i_end))
        n_out = np.diff(np.append(r_after[bpos], r_end))
        level_start = level[bpos]
        seg_off = _frame_slices(seg_fr, nf)

        # ---- producer's cumulative BLOCKED_OUT time at each insertion ------------------------
        s_t = np.concatenate(([self._state_t], st_t))
        s_v = np.concatenate(([self._state], st_v))
        in_bo = (s_v == _BLOCKED_OUT).astype(np.int64)
        c_at = self._blocked + np.concatenate(([0], np.cumsum(np.diff(s_t) * in_bo[:-1])))

        def blocked_at(t: I64) -> I64:
            j = np.maximum(np.searchsorted(s_t, t, side="right") - 1, 0)
            out: I64 = c_at[j] + np.maximum(t - s_t[j], 0) * in_bo[j]
            return out

        # ---- inter-insertion and production gaps -------------------------------------------
        ins_fr = frame_of(ins_t)
        prev_ins_t = np.concatenate(([-1 if self._ins_t is None else self._ins_t], ins_t[:-1]))
        prev_ins_s = np.concatenate(([self._I], ins_s[:-1]))
        ok_in = (ins_s == prev_ins_s + 1) & (ins_fr >= 0)
        if self._ins_t is None and ni:
            ok_in[0] = False
        gap_in = ins_t - prev_ins_t
        bins_in = gap_bins(gap_in * self.tick_ns)
        c_ins = blocked_at(ins_t)
        prev_c = np.concatenate(([self._ins_c], c_ins[:-1]))
        bins_prod = gap_bins((gap_in - (c_ins - prev_c)) * self.tick_ns)
        lossy = _jumped_frames(ins_s, self._I, ins_fr, nf)
        # Items per insertion record: its seq over the highest before it (refused ones included).
        ins_w = np.diff(np.maximum.accumulate(np.concatenate(([self._I], ins_s))))
        k_prof = self._profile
        if k_prof:
            sub = _sub_windows(ins_t, ins_fr, grid, k_prof)

        # ---- back-to-back inter-departure gaps ---------------------------------------------
        live_seq = np.concatenate((self._live_seq, ins_s))
        live_t = np.concatenate((self._live_t, ins_t))
        rem_fr = frame_of(rem_t)
        prev_rem_t = np.concatenate(([-1 if self._rem_t is None else self._rem_t], rem_t[:-1]))
        prev_rem_s = np.concatenate(([self._R], rem_s[:-1]))
        idx = np.minimum(np.searchsorted(live_seq, rem_s), max(live_seq.size - 1, 0))
        found = (live_seq[idx] == rem_s) if live_seq.size else np.zeros(nr, np.bool_)
        item_in = live_t[idx] if live_seq.size else np.zeros(nr, np.int64)
        ok_out = (rem_s == prev_rem_s + 1) & (rem_fr >= 0) & found & (item_in <= prev_rem_t)
        if self._rem_t is None and nr:
            ok_out[0] = False
        bins_out = gap_bins((rem_t - prev_rem_t) * self.tick_ns)
        lossy |= _jumped_frames(rem_s, self._R, rem_fr, nf)
        rem_w = np.diff(np.maximum.accumulate(np.concatenate(([self._R], rem_s))))
        if k_prof:
            sub_out = _sub_windows(rem_t, rem_fr, grid, k_prof)

        ins_off = _frame_slices(ins_fr, nf)
        rem_off = _frame_slices(rem_fr, nf)

        # ---- per-frame summaries -----------------------------------------------------------
        with_prod = self._with_states
        out: list[SubQueueSummary] = []
        for j in range(nf):
            a, b = int(seg_off[j]), int(seg_off[j + 1])
            lt = np.bincount(level[a:b], weights=dur[a:b]) if b > a else np.zeros(1)
            lt_i = np.rint(lt).astype(np.int64)
            held = np.flatnonzero(lt_i)
            lt_i = lt_i[: int(held[-1]) + 1] if held.size else lt_i[:1]
            ia, ib = int(ins_off[j]), int(ins_off[j + 1])
            ra, rb = int(rem_off[j]), int(rem_off[j + 1])
            m_in, m_out = ok_in[ia:ib], ok_out[ra:rb]
            h_in = np.bincount(bins_in[ia:ib][m_in], minlength=N_GAP_BINS)
            h_out = np.bincount(bins_out[ra:rb][m_out], minlength=N_GAP_BINS)
            h_prod = (
                np.bincount(bins_prod[ia:ib][m_in], minlength=N_GAP_BINS) if with_prod else None
            )
            prof = prof_out = None
            if k_prof:
                prof = _count(sub[ia:ib], ins_w[ia:ib], k_prof)
                prof_out = _count(sub_out[ra:rb], rem_w[ra:rb], k_prof)
            out.append(
                SubQueueSummary(
                    frame=self._next + j,
                    start_ticks=int(grid[j]),
                    end_ticks=int(grid[j + 1]),
                    covered_ticks=int(seg[j + 1] - seg[j]),
                    n_in=int(n_in[j]),
                    n_out=int(n_out[j]),
                    level_start=int(level_start[j]),
                    level_ticks=lt_i,
                    gap_in=h_in.astype(np.int64),
                    gap_out=h_out.astype(np.int64),
                    gap_prod=None if h_prod is None else h_prod.astype(np.int64),
                    tick_ns=self.tick_ns,
                    lossy=bool(lossy[j]),
                    profile=prof,
                    profile_out=prof_out,
                )
            )

        # ---- carry the state over ----------------------------------------------------------
        if ni:
            self._ins_t = int(ins_t[-1])
            self._ins_c = int(c_ins[-1])
        if nr:
            self._rem_t = int(rem_t[-1])
        self._I, self._R = max(self._I, i_end), max(self._R, r_end)
        self._state_t, self._state, self._blocked = int(s_t[-1]), int(s_v[-1]), int(c_at[-1])
        keep = live_seq > self._R
        self._live_seq, self._live_t = live_seq[keep], live_t[keep]
        self._next += nf
        self._cursor = limit
        return out
