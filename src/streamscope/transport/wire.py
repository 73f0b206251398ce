"""The agent → monitor wire format: a fixed 40-byte header followed by raw records.

In: a message type, the sender's ids, a watermark in raw ticks and a record array (or UTF-8 JSON
for control messages, or opaque bytes for SUMMARY). Out: bytes, and back. Nothing received is
ever unpickled.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from streamscope.core.errors import StreamscopeError
from streamscope.core.records import RECORD_FIELDS, Kind, empty_records

if TYPE_CHECKING:
    import numpy as np

    from streamscope.core.records import Records

    EXCHANGE_DTYPE: np.dtype[np.void]

MAGIC = b"SSW1"
#: magic, type, reserved, agent id, pid, watermark ticks, payload length (bytes), record count
HEADER = struct.Struct("<4sB3xIIqQI4x")
HEADER_SIZE = HEADER.size
#: Refuse anything larger: a corrupt length must not make us allocate without bound.
MAX_PAYLOAD = 1 << 30
#: A watermark meaning "this sender will send nothing more" (int64's largest).
WATERMARK_END = 2**63 - 1
#: One record's size (bytes): ``RECORD_DTYPE``'s, known without numpy (control messages, all a
#: program's command line sends, are encoded and checked without it).
RECORD_SIZE = sum(int(code[2:]) for _, code in RECORD_FIELDS)  # "<u4", "<i8": packed


class WireError(StreamscopeError):
    """Bytes that are not a well-formed streamscope message."""


class MsgType(IntEnum):
    HELLO = 1  # payload: JSON {"domain": ..., "role": ...}
    BATCH = 2  # payload: records
    END = 3  # sender is done; watermark = its last ticks
    FINISH = 4  # the run is over; payload JSON {"status", "error", "end_ticks"}
    START = 5  # the run starts; watermark = t0 in host ticks
    #: One calibration burst of a clock domain: rows of EXCHANGE_DTYPE; ``agent`` carries the
    #: domain's index among the topology's resources.
    CALIBRATION = 6
    #: Per-frame sub-queue summaries reduced where the records were made; the payload is opaque
    #: bytes here (``aggregate.subqueue.encode_summaries`` writes them), kept in ``Message.payload``.
    SUMMARY = 7
    #: Something an agent learnt while running, as JSON (e.g. functions it stopped tracing).
    NOTE = 8


#: One round trip: host ns before the request, the device's counter, host ns after the reply.
#: The same 24 bytes as a record, so the header's length check serves both.
EXCHANGE_FIELDS = (("t1_ns", "<i8"), ("t2_ticks", "<i8"), ("t3_ns", "<i8"))


def __getattr__(name: str) -> Any:
    """``EXCHANGE_DTYPE``, made with numpy the first time it is asked for."""
    if name != "EXCHANGE_DTYPE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np

    made = np.dtype(list(EXCHANGE_FIELDS))
    globals()[name] = made
    return made


def _dtype(mtype: MsgType) -> np.dtype[np.void]:
    """The record layout a message of ``mtype`` carries."""
    from streamscope.core import records

    return __getattr__("EXCHANGE_DTYPE") if mtype == MsgType.CALIBRATION else records.RECORD_DTYPE


@dataclass(frozen=True, slots=True)
class Message:
    type: MsgType
    agent: int
    pid: int
    watermark: int
    records: Records
    info: dict[str, Any]
    #: The raw payload of a SUMMARY message (empty for every other type).
    payload: bytes = b""


def encode(
    mtype: MsgType,
    agent: int,
    pid: int,
    watermark: int,
    records: Records | None = None,
    info: dict[str, Any] | None = None,
    *,
    payload: bytes | None = None,
) -> bytes:
    if mtype == MsgType.SUMMARY:
        if (records is not None and len(records)) or info is not None:
            raise ValueError("a SUMMARY message carries only its opaque payload")
        body = bytes(payload or b"")
        return HEADER.pack(MAGIC, int(mtype), agent, pid, watermark, len(body), 0) + body
    if payload is not None:
        raise ValueError(f"only SUMMARY messages carry an opaque payload, not {mtype.name}")
    if records is not None and len(records):
        import numpy as np

        payload = np.ascontiguousarray(records, dtype=_dtype(mtype)).tobytes()
        count = len(records)
    elif info is not None:
        payload = json.dumps(info).encode()
        count = 0
    else:
        payload, count = b"", 0
    return HEADER.pack(MAGIC, int(mtype), agent, pid, watermark, len(payload), count) + payload


def decode_header(header: bytes) -> tuple[MsgType, int, int, int, int, int]:
    """(type, agent, pid, watermark, payload length, record count) or WireError."""
    if len(header) != HEADER_SIZE:
        raise WireError(f"truncated header: {len(header)} of {HEADER_SIZE} bytes")
    magic, mtype, agent, pid, watermark, length, count = HEADER.unpack(header)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}: not a streamscope message")
    try:
        kind = MsgType(mtype)
    except ValueError:
        raise WireError(f"unknown message type {mtype}") from None
    if length > MAX_PAYLOAD or (count and length != count * RECORD_SIZE):
        raise WireError(f"inconsistent payload: {length} bytes for {count} records")
    return kind, agent, pid, watermark, length, count


def decode(data: bytes) -> Message:
    kind, agent, pid, watermark, length, count = decode_header(data[:HEADER_SIZE])
    payload = data[HEADER_SIZE:]
    if len(payload) != length:
        raise WireError(f"payload of {len(payload)} bytes, header says {length}")
    return decode_payload(kind, agent, pid, watermark, count, payload)


#: Record kinds a message may carry, and the largest probe id (the run file's INTEGER).
_KINDS = sorted(int(k) for k in Kind)
MAX_PROBE_ID = 2**31 - 1


def _check_records(records: Records) -> None:
    """Every field of every record in range, or ``WireError`` saying which (the monitor drops
    the connection that sent it and goes on)."""
    import numpy as np

    bad_kind = ~np.isin(records["kind"], np.array(_KINDS, dtype=np.uint32))
    if bad_kind.any():
        i = int(np.argmax(bad_kind))
        raise WireError(f"record {i} has unknown kind {int(records['kind'][i])}")
    too_big = records["probe"] > MAX_PROBE_ID
    if too_big.any():
        i = int(np.argmax(too_big))
        raise WireError(
            f"record {i} has probe id {int(records['probe'][i])}, beyond {MAX_PROBE_ID}"
        )


def decode_payload(
    kind: MsgType, agent: int, pid: int, watermark: int, count: int, payload: bytes
) -> Message:
    info: dict[str, Any] = {}
    if kind == MsgType.SUMMARY:
        if count:
            raise WireError(f"a SUMMARY message holds no records, header says {count}")
        return Message(kind, agent, pid, watermark, empty_records(), info, bytes(payload))
    if count:
        import numpy as np

        records = np.frombuffer(payload, dtype=_dtype(kind)).copy()
        if kind != MsgType.CALIBRATION:
            _check_records(records)
    else:
        records = empty_records()
        if payload:
            try:
                loaded = json.loads(payload.decode())
            except (UnicodeDecodeError, ValueError) as exc:
                raise WireError(f"control payload is not UTF-8 JSON: {exc}") from None
            if not isinstance(loaded, dict):
                raise WireError("control payload must be a JSON object")
            info = loaded
    return Message(kind, agent, pid, watermark, records, info)
