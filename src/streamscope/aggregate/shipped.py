"""Frames a cluster host's agent closed itself, as they cross to the monitor.

In: ``FrameResult``s a host reduced on its own frame grid (the run's grid placed on its clock),
each with where its two edges lay in the host's ticks when it closed. Out: their binary form for
a SUMMARY message (``FRAMES_MAGIC`` tells it from sub-queue summaries and state frames), and
back. The monitor maps the edges through its own fit of the host's clock: how far they land
from the frame's nominal edges is the frame's time uncertainty.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

from streamscope.aggregate.points import FrameResult
from streamscope.core.errors import StreamscopeError

#: The first bytes of a SUMMARY payload of a host's closed frames.
FRAMES_MAGIC = b"SSFR"
_VERSION = 2
_HEAD = struct.Struct("<4sHI")


class ShippedFrameError(StreamscopeError):
    """A payload that is not a host's whole frames."""


@dataclass(frozen=True, slots=True)
class ShippedFrame:
    """One frame a host closed: the result, and its edges in the host's ticks."""

    result: FrameResult
    lo_ticks: float
    hi_ticks: float


def encode_frames(frames: list[ShippedFrame]) -> bytes:
    body = json.dumps(
        [[f.result.to_dict(), f.lo_ticks, f.hi_ticks] for f in frames], separators=(",", ":")
    ).encode()
    # Compressed: a histogram's bins are mostly empty, a frame's figures alike from frame to
    # frame; a host's frames are 5-20x smaller so.
    return _HEAD.pack(FRAMES_MAGIC, _VERSION, len(frames)) + zlib.compress(body, 1)


def decode_frames(payload: bytes) -> list[ShippedFrame]:
    """The frames of ``encode_frames``'s payload (ShippedFrameError if it is not one)."""
    if len(payload) < _HEAD.size:
        raise ShippedFrameError(f"host frames: {len(payload)} bytes, less than a header")
    magic, version, n = _HEAD.unpack_from(payload)
    if magic != FRAMES_MAGIC or version != _VERSION:
        raise ShippedFrameError(
            f"host frames: magic {magic!r} version {version}; expected {FRAMES_MAGIC!r} "
            f"version {_VERSION}"
        )
    try:
        rows = json.loads(zlib.decompress(payload[_HEAD.size :]))
        out = [ShippedFrame(FrameResult.from_dict(d), float(lo), float(hi)) for d, lo, hi in rows]
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise ShippedFrameError(f"host frames: not {n} whole frames ({exc})") from exc
    if len(out) != n:
        raise ShippedFrameError(f"host frames: {len(out)} frames where the header says {n}")
    return out
