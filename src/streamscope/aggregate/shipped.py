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
_VERSION = 3
_HEAD = struct.Struct("<4sHI")


class ShippedFrameError(StreamscopeError):
    """A payload that is not a host's whole frames."""


@dataclass(frozen=True, slots=True)
class Stamped:
    """What a frame of a link's latency took from the producer's clock: the earliest and
    latest insertion ticks of its items there (``domain``'s), and where the host's grid of
    that clock placed them (virtual ns); ``violations``: items whose removal came before their
    insertion by those grids (their latency counted 0), ``slack_ns`` by how much at most."""

    domain: str
    lo_ticks: float
    hi_ticks: float
    lo_ns: float
    hi_ns: float
    violations: int = 0
    slack_ns: float = 0.0


@dataclass(frozen=True, slots=True)
class ShippedFrame:
    """One frame a host closed: the result, its edges in the host's ticks, for a link's
    latency what it took from the producer's clock, and ``slack_ns``: how far (by the host's
    grid) the records it counted may lie outside those edges (placed by an earlier grid)."""

    result: FrameResult
    lo_ticks: float
    hi_ticks: float
    stamped: Stamped | None = None
    slack_ns: float = 0.0


def encode_frames(frames: list[ShippedFrame]) -> bytes:
    body = json.dumps(
        [
            [f.result.to_dict(), f.lo_ticks, f.hi_ticks, _stamped(f.stamped), f.slack_ns]
            for f in frames
        ],
        separators=(",", ":"),
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
        out = [
            ShippedFrame(
                FrameResult.from_dict(d),
                float(lo),
                float(hi),
                None if st is None else Stamped(*st),
                float(slack),
            )
            for d, lo, hi, st, slack in rows
        ]
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise ShippedFrameError(f"host frames: not {n} whole frames ({exc})") from exc
    if len(out) != n:
        raise ShippedFrameError(f"host frames: {len(out)} frames where the header says {n}")
    return out


def _stamped(st: Stamped | None) -> list[object] | None:
    if st is None:
        return None
    return [st.domain, st.lo_ticks, st.hi_ticks, st.lo_ns, st.hi_ns, st.violations, st.slack_ns]
