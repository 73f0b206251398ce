"""Agent → monitor transport: the wire format and the links that carry it."""

from __future__ import annotations

from streamscope.transport.channels import InMemoryTransport, Transport, UnixSocketTransport
from streamscope.transport.wire import (
    EXCHANGE_DTYPE,
    HEADER_SIZE,
    WATERMARK_END,
    Message,
    MsgType,
    WireError,
    decode,
    decode_header,
    decode_payload,
    encode,
)

__all__ = [
    "EXCHANGE_DTYPE",
    "HEADER_SIZE",
    "WATERMARK_END",
    "InMemoryTransport",
    "Message",
    "MsgType",
    "Transport",
    "UnixSocketTransport",
    "WireError",
    "decode",
    "decode_header",
    "decode_payload",
    "encode",
]
