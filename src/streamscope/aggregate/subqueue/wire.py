"""The binary form of sub-queue summaries: a summary in, its fixed little-endian bytes out (and
back, or :class:`SummaryFormatError`); and the message that carries one sub-queue's summaries.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.subqueue.gaps import N_GAP_BINS
from streamscope.core.errors import StreamscopeError

if TYPE_CHECKING:
    from streamscope.aggregate.subqueue.summary import SubQueueSummary

__all__ = [
    "MAX_PROFILE_BINS",
    "SummaryFormatError",
    "read_batch",
    "read_summary",
    "write_batch",
    "write_summary",
]

I64 = NDArray[np.int64]
T = TypeVar("T")

#: The most sub-windows a profile may have (its bins are stored as <u2).
MAX_PROFILE_BINS = 65535

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
#: 2: the summaries after the batch's head are deflated (zlib): their histograms and profiles
#: are mostly small counts, and a host ships one per channel end and frame.
_BATCH_VERSION = 2
#: A batch inflates to this many bytes at most (a corrupt or hostile one is refused, not
#: inflated without end).
_MAX_INFLATED = 64 << 20
#: magic, version, reserved, key, number of summaries; each summary is then <u4 length + bytes.
_BATCH_HEAD = struct.Struct("<4sHHqI")
_LEN = struct.Struct("<I")

#: One stored sparse array: its bins, its counts, and how many entries it has.
_Sparse = tuple[bytes, bytes, int]
_NONE: _Sparse = (b"", b"", 0)


class SummaryFormatError(StreamscopeError, ValueError):
    """Bytes that are not a well-formed sub-queue summary (truncated, corrupt or another version)."""


class _Head(NamedTuple):
    """The fields of ``_HEAD``, in its order."""

    magic: bytes
    version: int
    flags: int
    frame: int
    start: int
    end: int
    covered: int
    n_in: int
    n_out: int
    level_start: int
    tick_ns: float
    n_lt: int
    n_gi: int
    n_go: int
    n_gp: int


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _sparse(h: I64, limit: int = N_GAP_BINS) -> _Sparse:
    nz = np.flatnonzero(h)
    if nz.size and int(nz[-1]) >= limit:
        raise ValueError(f"a gap histogram has {h.size} bins; at most {limit} can be stored")
    return nz.astype("<u2").tobytes(), h[nz].astype("<i8").tobytes(), int(nz.size)


def _profiles(s: SubQueueSummary) -> tuple[_Sparse, _Sparse, int] | None:
    """The two profiles stored sparsely and their number of sub-windows; None without them."""
    if (s.profile is None) != (s.profile_out is None):
        raise ValueError("a summary has both profiles (insertions, removals) or neither")
    if s.profile is None or s.profile_out is None:
        return None
    p_in = np.asarray(s.profile, dtype=np.int64)
    p_out = np.asarray(s.profile_out, dtype=np.int64)
    if not (
        1 <= p_in.size <= MAX_PROFILE_BINS
        and p_out.size == p_in.size
        and not bool(np.any(p_in < 0) or np.any(p_out < 0))
    ):
        raise ValueError(
            f"profiles need 1..{MAX_PROFILE_BINS} sub-windows (both alike) of counts >= 0"
        )
    return _sparse(p_in, p_in.size), _sparse(p_out, p_out.size), int(p_in.size)


def write_summary(s: SubQueueSummary) -> bytes:
    """Fixed little-endian layout: a header, ``level_ticks``, then each histogram sparsely
    (and, in version 2, the profiles' size in the header and their entries last)."""
    lt = np.asarray(s.level_ticks, dtype="<i8")
    parts = [_sparse(np.asarray(h, dtype=np.int64)) for h in (s.gap_in, s.gap_out)]
    has_prod = s.gap_prod is not None
    parts.append(_sparse(np.asarray(s.gap_prod, dtype=np.int64)) if has_prod else _NONE)
    flags = (_FLAG_LOSSY if s.lossy else 0) | (_FLAG_PROD if has_prod else 0)
    extra = b""
    profiles = _profiles(s)
    if profiles is not None:
        sp_in, sp_out, size = profiles
        parts += [sp_in, sp_out]
        flags |= _FLAG_PROFILE
        extra = _HEAD2.pack(size, sp_in[2], sp_out[2])
    head = _HEAD.pack(
        _MAGIC,
        _VERSION_PROFILE if extra else _VERSION,
        flags,
        s.frame,
        s.start_ticks,
        s.end_ticks,
        s.covered_ticks,
        s.n_in,
        s.n_out,
        s.level_start,
        s.tick_ns,
        lt.size,
        parts[0][2],
        parts[1][2],
        parts[2][2],
    )
    return b"".join([head, extra, lt.tobytes(), *(p for b, c, _ in parts for p in (b, c))])


def write_batch(key: int, bodies: list[bytes]) -> bytes:
    """One message body: ``key`` (which sub-queue; the caller decides its meaning) and the
    summaries' bytes, each after its length."""
    parts = []
    for body in bodies:
        parts += [_LEN.pack(len(body)), body]
    head = _BATCH_HEAD.pack(_BATCH_MAGIC, _BATCH_VERSION, 0, key, len(bodies))
    return head + zlib.compress(b"".join(parts), 1)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


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


def _read_head(data: bytes) -> _Head:
    """The header, its magic, version and flags checked."""
    if len(data) < _HEAD.size:
        raise SummaryFormatError(f"truncated summary: {len(data)} of {_HEAD.size} header bytes")
    head = _Head._make(_HEAD.unpack_from(data))
    version, flags = head.version, head.flags
    if head.magic != _MAGIC:
        raise SummaryFormatError(f"bad magic {head.magic!r}: not a sub-queue summary")
    if version not in (_VERSION, _VERSION_PROFILE):
        raise SummaryFormatError(
            f"summary version {version}, this reader knows {_VERSION} and {_VERSION_PROFILE}"
        )
    if flags & ~(_FLAG_LOSSY | _FLAG_PROD | _FLAG_PROFILE):
        raise SummaryFormatError(f"unknown summary flags {flags:#x}")
    if not flags & _FLAG_PROD and head.n_gp:
        raise SummaryFormatError("production gaps present but not flagged")
    if bool(flags & _FLAG_PROFILE) != (version == _VERSION_PROFILE):
        raise SummaryFormatError(f"a version {version} summary with flags {flags:#x}")
    return head


def _read_profile_head(data: bytes) -> tuple[int, int, int]:
    """Version 2's sub-windows and stored entries of each profile, checked."""
    if len(data) < _HEAD.size + _HEAD2.size:
        raise SummaryFormatError("truncated summary: the profiles' header is cut short")
    n_prof, n_pe, n_po = _HEAD2.unpack_from(data, _HEAD.size)
    if not (1 <= n_prof <= MAX_PROFILE_BINS and n_pe <= n_prof and n_po <= n_prof):
        raise SummaryFormatError(f"profiles of {n_prof} sub-windows, {n_pe} and {n_po} stored")
    return n_prof, n_pe, n_po


def _check_frame(head: _Head) -> None:
    if head.frame < 0 or not (0 <= head.covered <= head.end - head.start):
        raise SummaryFormatError(
            f"inconsistent frame {head.frame}: [{head.start}, {head.end}) with "
            f"{head.covered} ticks covered"
        )
    if head.n_in < 0 or head.n_out < 0 or head.level_start < 0:
        raise SummaryFormatError("negative count or level in summary")
    if not (math.isfinite(head.tick_ns) and head.tick_ns > 0.0):
        raise SummaryFormatError(f"tick_ns must be finite and positive, got {head.tick_ns}")


def _read_level_ticks(data: bytes, pos: int, head: _Head) -> I64:
    lt = np.frombuffer(data, dtype="<i8", count=head.n_lt, offset=pos).astype(np.int64)
    if head.n_lt < 1 or bool(np.any(lt < 0)) or sum(lt.tolist()) != head.covered:
        raise SummaryFormatError("level_ticks must be >= 0 and sum to covered_ticks")
    if head.n_lt > 1 and lt[-1] == 0:
        raise SummaryFormatError("level_ticks has untrimmed trailing zeros")
    return lt


def read_summary(cls: type[SubQueueSummary], b: bytes) -> SubQueueSummary:
    """The summary (of class ``cls``) that :func:`write_summary` wrote, or
    :class:`SummaryFormatError`."""
    data = bytes(b)
    head = _read_head(data)
    has_profile = bool(head.flags & _FLAG_PROFILE)
    n_prof, n_pe, n_po = _read_profile_head(data) if has_profile else (0, 0, 0)
    pos = _HEAD.size + (_HEAD2.size if has_profile else 0)
    want = pos + 8 * head.n_lt + _PAIR * (head.n_gi + head.n_go + head.n_gp + n_pe + n_po)
    if len(data) != want:
        raise SummaryFormatError(f"summary of {len(data)} bytes, its header says {want}")
    _check_frame(head)
    lt = _read_level_ticks(data, pos, head)
    pos += 8 * head.n_lt
    hists: list[I64] = []
    for n in (head.n_gi, head.n_go, head.n_gp):
        h, pos = _read_sparse(data, pos, n, N_GAP_BINS)
        hists.append(h)
    profile = profile_out = None
    if has_profile:
        profile, pos = _read_sparse(data, pos, n_pe, n_prof)
        profile_out = _read_sparse(data, pos, n_po, n_prof)[0]
    return cls(
        frame=head.frame,
        start_ticks=head.start,
        end_ticks=head.end,
        covered_ticks=head.covered,
        n_in=head.n_in,
        n_out=head.n_out,
        level_start=head.level_start,
        level_ticks=lt,
        gap_in=hists[0],
        gap_out=hists[1],
        gap_prod=hists[2] if head.flags & _FLAG_PROD else None,
        tick_ns=head.tick_ns,
        lossy=bool(head.flags & _FLAG_LOSSY),
        profile=profile,
        profile_out=profile_out,
    )


def _inflate(deflated: bytes) -> bytes:
    """The batch's summaries, inflated; refused if corrupt or past ``_MAX_INFLATED``."""
    z = zlib.decompressobj()
    try:
        data = z.decompress(deflated, _MAX_INFLATED)
    except zlib.error as exc:
        raise SummaryFormatError(f"corrupt summaries: {exc}") from None
    if z.unconsumed_tail or not z.eof or z.unused_data:
        raise SummaryFormatError("corrupt summaries: not one whole deflated stream")
    return data


def read_batch(b: bytes, parse: Callable[[bytes], T]) -> tuple[int, list[T]]:
    """``(key, items)`` from :func:`write_batch`'s bytes, each body read by ``parse`` in order,
    or :class:`SummaryFormatError`."""
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
    data = _inflate(data[_BATCH_HEAD.size :])
    if count * (_LEN.size + _HEAD.size) > len(data):
        raise SummaryFormatError(f"{count} summaries cannot fit in {len(data)} bytes")
    pos = 0
    out: list[T] = []
    for _ in range(count):
        if pos + _LEN.size > len(data):
            raise SummaryFormatError("truncated summaries: a length is missing")
        (n,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if pos + n > len(data):
            raise SummaryFormatError("truncated summaries: a summary is cut short")
        out.append(parse(data[pos : pos + n]))
        pos += n
    if pos != len(data):
        raise SummaryFormatError(f"{len(data) - pos} stray bytes after the summaries")
    return key, out
