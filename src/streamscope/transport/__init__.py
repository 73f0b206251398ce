"""Agent → monitor transport: the wire format and the links that carry it."""

from __future__ import annotations

from typing import Any

from streamscope.transport.channels import InMemoryTransport, Transport, UnixSocketTransport
from streamscope.transport.wire import (
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


def __getattr__(name: str) -> Any:
    """``EXCHANGE_DTYPE``, made with numpy when first asked for (a link that carries only
    control messages never loads numpy)."""
    from streamscope.transport import wire

    return getattr(wire, name)


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
