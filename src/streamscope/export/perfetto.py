"""Perfetto's protobuf trace format (a ``Trace`` of ``TracePacket`` s) from a ``Timeline``.

In: a ``Timeline``. Out: a ``.pftrace`` file the Perfetto UI opens: ``TrackDescriptor`` packets
for a process track per resource (its clock domain and bound widths in the description), a
thread track per stage or per worker of a pool (and a "STAGE calls" child track where traced calls cannot nest with its
state slices) and a counter track per counter series; then ``TrackEvent`` packets, sorted by
time, on one trusted packet sequence: slice begin/end per state slice and per traced call (named
by function, nested), a counter value per sample, an instant per other raw record (its value
as a debug annotation) and per stack sample kept (named by its function; its state and stack
as debug annotations). A global "streamscope
run" track holds one instant at 0 with the run's metadata (clock domains, uncertainty) as JSON.

The few descriptors are built with Perfetto's generated classes; the bulk of events is encoded
straight to protobuf wire format with numpy (the same bytes, without a Python object per event).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import STATE_LABELS, SampledState
from streamscope.export.calls import nest_events, slice_labels
from streamscope.export.tracks import KIND_NAMES, Timeline

U8 = NDArray[np.uint8]
Column = tuple[U8, NDArray[np.int64]]  # bytes per row (padded) and each row's length
SEQUENCE_ID = 1
RUN_TRACK = 1
TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4


def _pb2() -> Any:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2

    return perfetto_trace_pb2


def process_uuid(pid: int) -> int:
    return 1000 + pid


def thread_uuid(tid: int) -> int:
    return 100_000 + tid


def calls_uuid(tid: int) -> int:
    """The track of a stage's calls where they cannot nest with its state slices."""
    return 500_000 + tid


def counter_uuid(index: int) -> int:
    return 1_000_000 + index


def _varint(values: NDArray[Any]) -> Column:
    """Protobuf varints of ``values`` (int64 as two's complement uint64), one row each."""
    v = np.asarray(values).astype(np.int64).view(np.uint64)
    n = len(v)
    lens = np.ones(n, dtype=np.int64)
    for k in range(1, 10):
        lens += v >= np.uint64(1 << (7 * k))
    width = int(lens.max()) if n else 1
    mat = np.empty((n, width), dtype=np.uint8)
    for k in range(width):
        byte = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
        byte |= np.where(k < lens - 1, np.uint64(0x80), np.uint64(0))
        mat[:, k] = byte.astype(np.uint8)
    return mat, lens


def _const(data: bytes, n: int) -> Column:
    row = np.frombuffer(data, dtype=np.uint8)
    return np.broadcast_to(row, (n, len(row))), np.full(n, len(row), dtype=np.int64)


def _lookup(table: list[bytes], ids: NDArray[Any]) -> Column:
    """Per row the bytes ``table[id]`` (a few distinct strings: names, fixed fields)."""
    width = max((len(b) for b in table), default=1) or 1
    mat = np.zeros((len(table), width), dtype=np.uint8)
    for i, b in enumerate(table):
        mat[i, : len(b)] = np.frombuffer(b, dtype=np.uint8)
    lens = np.array([len(b) for b in table], dtype=np.int64)
    ix = np.asarray(ids, dtype=np.int64)
    return mat[ix], lens[ix]


def _fixed64(values: NDArray[np.float64]) -> Column:
    raw = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(-1, 8)
    return raw, np.full(len(values), 8, dtype=np.int64)


def _join(cols: list[Column]) -> tuple[U8, NDArray[np.int64]]:
    """Rows made of ``cols`` side by side: the flat bytes (row after row) and row lengths."""
    mats = [m for m, _ in cols]
    n = mats[0].shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    mask = np.hstack([np.arange(m.shape[1]) < lens[:, None] for m, lens in cols])
    flat: U8 = np.hstack(mats)[mask]
    return flat, np.sum([lens for _, lens in cols], axis=0).astype(np.int64)


def _varint_bytes(value: int) -> bytes:
    m, lens = _varint(np.array([value]))
    return bytes(m[0, : int(lens[0])])


def _field_tag(number: int, wire: int) -> bytes:
    return _varint_bytes((number << 3) | wire)


def _string_field(number: int, s: str) -> bytes:
    b = s.encode()
    return _field_tag(number, 2) + _varint_bytes(len(b)) + b


def _packets(
    ts: NDArray[np.int64], body: tuple[U8, NDArray[np.int64]]
) -> tuple[U8, NDArray[np.int64]]:
    """``Trace.packet`` entries, one per row: timestamp, sequence id and the TrackEvent
    ``body``. Returns the flat bytes and each packet's length."""
    flat, lens = body
    n = len(ts)
    ev_mat = _ragged(flat, lens)
    pkt = _join(
        [
            _const(_field_tag(8, 0), n),  # timestamp
            _varint(ts),
            _const(_field_tag(10, 0) + bytes([SEQUENCE_ID]), n),  # trusted_packet_sequence_id
            _const(_field_tag(11, 2), n),  # track_event
            _varint(lens),
            ev_mat,
        ]
    )
    return _join([_const(_field_tag(1, 2), n), _varint(pkt[1]), _ragged(*pkt)])


def _ragged(flat: U8, lens: NDArray[np.int64]) -> Column:
    """Flat rows back into a padded matrix (for nesting one message in another)."""
    n = len(lens)
    width = int(lens.max()) if n else 1
    mat = np.zeros((n, width), dtype=np.uint8)
    mask = np.arange(width) < lens[:, None]
    mat[mask] = flat
    return mat, lens


#: One kind of event's packets before encoding: timestamps, TrackEvent bodies (flat bytes and
#: lengths) and tie ranks.
Part = tuple[NDArray[np.int64], tuple[U8, NDArray[np.int64]], NDArray[np.int64]]


def _events(
    tl: Timeline, counter_tracks: list[int]
) -> list[tuple[NDArray[np.int64], U8, NDArray[np.int64], NDArray[np.int64]]]:
    """(timestamps, flat packet bytes, packet lengths, tie ranks) per kind of event; the caller
    sorts them by time, then tie rank (each track's slice events at equal times: in the order
    they nest), then as they come."""
    parts = [
        *_slice_events(tl), *_counter_events(tl, counter_tracks), *_instant_events(tl),
        *_sample_events(tl),
    ]  # fmt: skip
    out = []
    for ts, body, tie in parts:
        flat, lens = _packets(ts, body)
        out.append((ts, flat, lens, tie))
    return out


def _event_head(kind: int) -> bytes:
    """A TrackEvent's type field, then the tag of its track's uuid (which follows)."""
    return _field_tag(9, 0) + bytes([kind]) + _field_tag(11, 0)


def _slice_events(tl: Timeline) -> list[Part]:
    """Slices and calls: begin and end per track, in an order that nests (state slices by
    state, calls by function name); begins and ends apart, as only begins carry a name."""
    ev = nest_events(tl)
    if not len(ev):
        return []
    labels = [*STATE_LABELS, *tl.function_names()]
    names = [_string_field(23, x) for x in labels]
    label = slice_labels(tl, ev, len(STATE_LABELS))  # into ``labels``
    track = np.where(
        ev.calls_track, calls_uuid(0) + ev.tid.astype(np.int64), thread_uuid(0) + ev.tid
    )
    parts: list[Part] = []
    for begin in (True, False):
        m = ev.begin == begin
        n = int(m.sum())
        kind = TYPE_SLICE_BEGIN if begin else TYPE_SLICE_END
        cols = [_const(_event_head(kind), n), _varint(track[m])]
        if begin:
            cols.append(_lookup(names, label[m]))
        parts.append((ev.t_ns[m], _join(cols), np.flatnonzero(m)))
    return parts


def _counter_events(tl: Timeline, counter_tracks: list[int]) -> list[Part]:
    """Counter values, one track per series (its finite samples)."""
    parts: list[Part] = []
    dbl = _field_tag(44, 1)
    for c, uuid in zip(tl.counters, counter_tracks, strict=True):
        ok = np.isfinite(c.values)
        n = int(ok.sum())
        if not n:
            continue
        body = _join(
            [
                _const(_event_head(TYPE_COUNTER), n),
                _varint(np.full(n, uuid)),
                _const(dbl, n),
                _fixed64(c.values[ok]),
            ]
        )
        parts.append((c.t_ns[ok], body, np.zeros(n, dtype=np.int64)))
    return parts


def _instant_events(tl: Timeline) -> list[Part]:
    """Instants: the record kind as name, its value as a debug annotation."""
    i = tl.instants
    if not len(i):
        return []
    n = len(i)
    kinds = sorted(KIND_NAMES)
    names = [_string_field(23, KIND_NAMES[k]) for k in kinds] + [_string_field(23, "record")]
    kid = np.searchsorted(kinds, i.kind)
    kid = np.where(np.isin(i.kind, kinds), kid, len(kinds))
    ann_name = _string_field(10, "value") + _field_tag(4, 0)
    ann_v = _varint(i.value)
    ann = _join([_const(ann_name, n), ann_v])
    body = _join(
        [
            _const(_event_head(TYPE_INSTANT), n),
            _varint(thread_uuid(0) + i.tid.astype(np.int64)),
            _lookup(names, kid),
            _const(_field_tag(4, 2), n),
            _varint(ann[1]),
            _ragged(*ann),
        ]
    )
    return [(i.t_ns, body, np.zeros(n, dtype=np.int64))]


def _sample_events(tl: Timeline) -> list[Part]:
    """Stack samples: an instant on its worker's track, named by the function it was
    in (or its state, with no stack read), its state and whole stack as debug annotations."""
    sm = tl.samples
    n = len(sm)
    if not n:
        return []
    combos, which = np.unique(
        sm.stack.astype(np.int64) * 8 + sm.state.astype(np.int64), return_inverse=True
    )
    table = []
    for c in combos.tolist():
        stack = tl.stack_names[c // 8] if c // 8 >= 0 else ""
        state = _SAMPLED[c % 8] if c % 8 < len(_SAMPLED) else "sampled"
        leaf = stack.rsplit(";", 1)[-1] if stack else f"({state})"
        anns = b""
        for key, text in (("state", state), ("stack", stack)):
            ann = _string_field(10, key) + _string_field(6, text)
            anns += _field_tag(4, 2) + _varint_bytes(len(ann)) + ann
        table.append(_string_field(23, leaf) + anns)
    body = _join([
        _const(_event_head(TYPE_INSTANT), n),
        _varint(thread_uuid(0) + sm.tid.astype(np.int64)),
        _lookup(table, which),
    ])  # fmt: skip
    return [(sm.t_ns, body, np.zeros(n, dtype=np.int64))]


#: A stack sample's state, by its code (``core.records.SampledState``).
_SAMPLED = tuple(s.label for s in SampledState)


def _new_packet(trace: Any) -> Any:
    """A packet added to ``trace`` on the one sequence."""
    p = trace.packet.add()
    p.trusted_packet_sequence_id = SEQUENCE_ID
    return p


def _descriptors(tl: Timeline) -> tuple[bytes, list[int], int]:
    """Descriptor packets (and the metadata instant) as bytes, the counter tracks' uuids, and
    how many tracks they describe."""
    pb = _pb2()
    trace = pb.Trace()
    first = _new_packet(trace)
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    first.track_descriptor.uuid = RUN_TRACK
    first.track_descriptor.name = f"streamscope run {tl.name}"
    first.track_descriptor.description = "virtual ns since the run's start; all clocks mapped"
    _describe_processes(trace, tl)
    _describe_threads(trace, tl)
    uuids = _describe_counters(trace, tl)
    meta = _new_packet(trace)
    meta.timestamp = 0
    meta.track_event.type = pb.TrackEvent.TYPE_INSTANT
    meta.track_event.track_uuid = RUN_TRACK
    meta.track_event.name = "streamscope metadata"
    ann = meta.track_event.debug_annotations.add()
    ann.name = "metadata"
    ann.string_value = json.dumps(tl.metadata())
    n_tracks = 1 + len(tl.processes) + len(tl.threads) + len(tl.call_tracks) + len(tl.counters)
    return trace.SerializeToString(), uuids, n_tracks


def _describe_processes(trace: Any, tl: Timeline) -> None:
    """A process track per resource, its clock domain as JSON in the description."""
    domains = {d.name: d for d in tl.domains}
    for pr in tl.processes:
        d = _new_packet(trace).track_descriptor
        d.uuid = process_uuid(pr.pid)
        d.process.pid = pr.pid
        d.process.process_name = f"{pr.name} [{pr.kind}, clock {pr.clock_domain}]"
        dom = domains.get(pr.clock_domain)
        info: dict[str, Any] = dom.to_dict() if dom is not None else {"name": pr.clock_domain}
        info["max_bound_half_width_ns"] = tl.uncertainty_ns.get(pr.clock_domain)
        d.description = "clock domain " + json.dumps(info)


def _describe_threads(trace: Any, tl: Timeline) -> None:
    """A thread track per stage, then a calls track under each stage that needs one."""
    for t in tl.threads:
        d = _new_packet(trace).track_descriptor
        d.uuid = thread_uuid(t.tid)
        d.thread.pid = t.pid
        d.thread.tid = t.tid
        d.thread.thread_name = f"{t.label} ({t.role})"
    stage = {t.tid: t.label for t in tl.threads}
    for tid in tl.call_tracks:
        d = _new_packet(trace).track_descriptor
        d.uuid = calls_uuid(tid)
        d.parent_uuid = thread_uuid(tid)
        d.name = f"{stage[tid]} calls"


def _describe_counters(trace: Any, tl: Timeline) -> list[int]:
    """A counter track per series under its resource's track; returns their uuids."""
    uuids = []
    for k, c in enumerate(tl.counters):
        d = _new_packet(trace).track_descriptor
        d.uuid = counter_uuid(k)
        d.parent_uuid = process_uuid(c.pid)
        d.name = c.name
        d.counter.unit_name = c.unit
        uuids.append(d.uuid)
    return uuids


def encode_perfetto(tl: Timeline) -> tuple[bytes, int, int]:
    """``tl`` as a serialized Perfetto ``Trace``; also the number of tracks and of events."""
    head, uuids, n_tracks = _descriptors(tl)
    parts = _events(tl, uuids)
    if not parts:
        return head, n_tracks, 0
    ts = np.concatenate([p[0] for p in parts])
    lens = np.concatenate([p[2] for p in parts])
    flat = np.concatenate([p[1] for p in parts])
    order = np.lexsort((np.concatenate([p[3] for p in parts]), ts))
    mat, _ = _ragged(flat, lens)  # packets as padded rows: reorder rows, then drop the padding
    new_lens = lens[order]
    body: U8 = mat[order][np.arange(mat.shape[1]) < new_lens[:, None]]
    return head + body.tobytes(), n_tracks, len(ts)


def write_perfetto(tl: Timeline, path: str | Path) -> tuple[int, int]:
    """Write ``tl`` as a Perfetto protobuf trace to ``path``; returns (tracks, events)."""
    data, tracks, events = encode_perfetto(tl)
    Path(path).write_bytes(data)
    return tracks, events


class PerfettoExporter:
    """The ``perfetto`` format (``export/base.py``)."""

    name = "perfetto"
    output_file_extension = ".pftrace"

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        return write_perfetto(timeline, path)
