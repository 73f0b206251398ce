"""The agent → monitor wire format: round trips and refusal of malformed bytes."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.core.records import RECORD_DTYPE, Kind, make_records
from streamscope.transport.wire import HEADER_SIZE, MsgType, WireError, decode, encode


def test_batch_round_trip() -> None:
    rec = make_records(
        int(Kind.PUT), 5, np.arange(10, dtype=np.int64), np.arange(1, 11, dtype=np.int64)
    )
    msg = decode(encode(MsgType.BATCH, 3, 1234, 999, rec))
    assert msg.type == MsgType.BATCH
    assert (msg.agent, msg.pid, msg.watermark) == (3, 1234, 999)
    assert msg.records.dtype == RECORD_DTYPE
    assert np.array_equal(msg.records, rec)


def test_control_round_trip() -> None:
    msg = decode(encode(MsgType.FINISH, 0, 1, 5, info={"status": "failed", "error": "x"}))
    assert msg.info == {"status": "failed", "error": "x"}
    assert len(msg.records) == 0


@pytest.mark.parametrize(
    ("mangle", "match"),
    [
        (lambda b: b"XXXX" + b[4:], "bad magic"),
        (lambda b: b[:10], "truncated"),
        (lambda b: b[:4] + bytes([99]) + b[5:], "unknown message type"),
        (lambda b: b + b"extra", "payload"),
    ],
)
def test_malformed_bytes_are_refused(mangle, match) -> None:  # type: ignore[no-untyped-def]
    good = encode(
        MsgType.BATCH, 1, 1, 1, make_records(1, 1, np.zeros(2, np.int64), np.ones(2, np.int64))
    )
    with pytest.raises(WireError, match=match):
        decode(mangle(good))


def test_control_payload_must_be_json_object() -> None:
    data = bytearray(encode(MsgType.FINISH, 0, 1, 5, info={"a": 1}))
    data[HEADER_SIZE:] = b"[1, 2]" + b" " * (len(data) - HEADER_SIZE - 6)
    with pytest.raises(WireError, match="JSON object"):
        decode(bytes(data))


def test_calibration_burst_round_trip() -> None:
    from streamscope.transport.wire import EXCHANGE_DTYPE

    ex = np.zeros(3, dtype=EXCHANGE_DTYPE)
    ex["t1_ns"], ex["t2_ticks"], ex["t3_ns"] = [1, 2, 3], [10, 20, 30], [4, 5, 6]
    msg = decode(encode(MsgType.CALIBRATION, 2, 99, 0, ex))
    assert msg.agent == 2
    assert msg.records.dtype == EXCHANGE_DTYPE
    assert msg.records["t2_ticks"].tolist() == [10, 20, 30]
