"""The agent → monitor wire format: round trips and refusal of malformed bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamscope.core.records import RECORD_DTYPE, Kind, make_records
from streamscope.transport.wire import (
    EXCHANGE_DTYPE,
    HEADER_SIZE,
    MAX_PROBE_ID,
    MsgType,
    WireError,
    decode,
    encode,
)


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


def test_summary_payload_is_kept_as_opaque_bytes() -> None:
    body = b"\x00\x01not json\xff" * 3
    msg = decode(encode(MsgType.SUMMARY, 4, 77, 123, payload=body))
    assert msg.type == MsgType.SUMMARY == 7
    assert (msg.agent, msg.pid, msg.watermark) == (4, 77, 123)
    assert msg.payload == body
    assert msg.info == {}
    assert len(msg.records) == 0
    assert decode(encode(MsgType.SUMMARY, 4, 77, 123)).payload == b""


def test_summary_carries_encoded_summaries() -> None:
    from streamscope.aggregate.subqueue import SubQueueFrames, decode_summaries, encode_summaries

    sq = SubQueueFrames(tick_ns=0.5)
    sq.set_grid(0, 100)
    sq.add_insertions(np.array([1, 5], np.int64), np.array([1, 2], np.int64))
    summaries = sq.finish(250)
    msg = decode(encode(MsgType.SUMMARY, 1, 2, 250, payload=encode_summaries(9, summaries)))
    assert decode_summaries(msg.payload) == (9, summaries)


def test_other_messages_keep_an_empty_payload() -> None:
    assert decode(encode(MsgType.FINISH, 0, 1, 5, info={"a": 1})).payload == b""
    with pytest.raises(ValueError, match="only SUMMARY"):
        encode(MsgType.BATCH, 0, 1, 5, payload=b"x")
    with pytest.raises(ValueError, match="only its opaque payload"):
        encode(MsgType.SUMMARY, 0, 1, 5, info={"a": 1}, payload=b"x")


def test_summary_with_a_record_count_is_refused() -> None:
    from streamscope.core.records import RECORD_DTYPE as R
    from streamscope.transport.wire import HEADER, MAGIC

    data = HEADER.pack(MAGIC, int(MsgType.SUMMARY), 0, 0, 0, R.itemsize, 1) + bytes(R.itemsize)
    with pytest.raises(WireError, match="SUMMARY"):
        decode(data)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("probe", 2**31, "probe id 2147483648"),
        ("probe", 2**32 - 1, "probe id 4294967295"),
        ("kind", 0, "unknown kind 0"),
        ("kind", 999, "unknown kind 999"),
    ],
)
def test_a_record_out_of_range_is_refused(field: str, value: int, match: str) -> None:
    rec = make_records(int(Kind.PUT), 3, np.arange(5, dtype=np.int64), np.arange(5, dtype=np.int64))
    rec[field][2] = value
    data = encode(MsgType.BATCH, 1, 7, 100, rec)
    with pytest.raises(WireError, match=f"record 2 has {match}"):
        decode(data)


_GOOD = [
    encode(MsgType.BATCH, 1, 7, 100, make_records(1, 3, np.arange(4, dtype=np.int64),
                                                  np.arange(4, dtype=np.int64))),
    encode(MsgType.HELLO, 2, 7, 0, info={"domain": "dev", "stages": ["a"]}),
    encode(MsgType.CALIBRATION, 2, 7, 0, np.zeros(3, dtype=EXCHANGE_DTYPE)),
    encode(MsgType.SUMMARY, 2, 7, 0, payload=b"\x01\x02\x03"),
]  # fmt: skip


@given(
    st.sampled_from(_GOOD),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
    st.integers(0, 10_000),
    st.binary(max_size=64),
)
def test_any_damage_to_a_message_decodes_or_is_refused(
    good: bytes, flips: list[tuple[int, int]], cut: int, tail: bytes
) -> None:
    """Bytes changed anywhere, the message cut short or lengthened: ``decode`` gives a message
    whose every record is in range, or a ``WireError`` — nothing else."""
    data = bytearray(good)
    for at, value in flips:
        data[at % len(data)] = value
    data = data[: max(cut, HEADER_SIZE // 2)] + tail if cut < len(data) else data + tail
    try:
        msg = decode(bytes(data))
    except WireError:
        return
    if msg.type not in (MsgType.CALIBRATION, MsgType.SUMMARY) and len(msg.records):
        assert set(msg.records["kind"].tolist()) <= {int(k) for k in Kind}
        assert int(msg.records["probe"].max()) <= MAX_PROBE_ID
