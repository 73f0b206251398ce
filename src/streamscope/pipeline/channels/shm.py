"""A bounded FIFO between processes: fixed-size slots in shared memory and two semaphores.

In: items from a producer process (ints, floats, bytes, str and numpy arrays in a fixed binary
layout; anything else pickled between the pipeline's own processes). Out: the same items at the
consumer, with tail/head records taken in each end's own process; with ``keep_tags``, each
item's path tag beside it (``latency(SRC ~> DST)`` through processes), a path's origin sampling
and recording the tags that leave (``tag_departures``), its end recording those that arrive.
"""

from __future__ import annotations

import mmap
import pickle
import struct
import sys
from multiprocessing.context import BaseContext
from typing import Any

from streamscope.core import native
from streamscope.core.errors import PipelineError
from streamscope.core.records import State
from streamscope.core.stream import EOS, Aborted

#: Slot header: payload length, payload type, the item's path tag (0: none; ``keep_tags``).
_SLOT = struct.Struct("<IB3xq")
_T_EOS, _T_INT, _T_FLOAT, _T_BYTES, _T_STR, _T_ARRAY, _T_PICKLE, _T_ABORT = range(8)
_ARRAY_HEAD = struct.Struct("<16sB")
DEFAULT_SLOT_BYTES = 4096


def encode_item(item: Any) -> tuple[int, bytes]:
    """(type, payload) for one item; numbers, bytes, text and arrays avoid pickle."""
    if item is EOS:
        return _T_EOS, b""
    if type(item) is int and -(1 << 63) <= item < (1 << 63):
        return _T_INT, struct.pack("<q", item)
    if type(item) is float:
        return _T_FLOAT, struct.pack("<d", item)
    if type(item) is bytes:
        return _T_BYTES, item
    if type(item) is str:
        return _T_STR, item.encode()
    # An array only where numpy is loaded (by the stage that made the item): not imported for it
    np = sys.modules.get("numpy")
    if (
        np is not None
        and type(item) is np.ndarray
        and item.dtype.kind in "biufc"
        and item.ndim <= 8
    ):
        head = _ARRAY_HEAD.pack(item.dtype.str.encode(), item.ndim)
        shape = struct.pack(f"<{item.ndim}q", *item.shape)
        return _T_ARRAY, head + shape + np.ascontiguousarray(item).tobytes()
    return _T_PICKLE, pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)


def decode_item(kind: int, payload: bytes) -> Any:
    if kind == _T_INT:
        return struct.unpack("<q", payload)[0]
    if kind == _T_FLOAT:
        return struct.unpack("<d", payload)[0]
    if kind == _T_BYTES:
        return payload
    if kind == _T_STR:
        return payload.decode()
    if kind == _T_ARRAY:
        import numpy as np  # an array was sent: its stage had it loaded

        dtype, ndim = _ARRAY_HEAD.unpack_from(payload)
        shape = struct.unpack_from(f"<{ndim}q", payload, _ARRAY_HEAD.size)
        start = _ARRAY_HEAD.size + 8 * ndim
        return (
            np.frombuffer(payload[start:], dtype=np.dtype(dtype.rstrip(b"\0").decode()))
            .reshape(shape)
            .copy()
        )
    if kind == _T_PICKLE:
        # Only ever written by this pipeline's own forked processes, never received from outside.
        return pickle.loads(payload)  # noqa: S301
    if kind == _T_ABORT:
        raise Aborted("channel")
    return EOS


class ProcessChannel:
    """Single-producer single-consumer bounded FIFO in an anonymous shared mapping.

    Create it before forking. The producer stamps its tail record after writing the slot and
    before releasing it, the consumer stamps its head record after reading and before freeing
    the slot: so a removal is never recorded before its insertion, and the recorded occupancy
    never exceeds the capacity.
    """

    def __init__(
        self, name: str, capacity: int, ctx: BaseContext, slot_bytes: int = DEFAULT_SLOT_BYTES
    ) -> None:
        if capacity < 1:
            raise PipelineError(f"channel {name!r}: capacity must be at least 1 between processes")
        self.name = name
        self.capacity = capacity
        self.slot_bytes = slot_bytes
        self._stride = _SLOT.size + slot_bytes
        self._mem = mmap.mmap(-1, capacity * self._stride)
        self._free = ctx.Semaphore(capacity)
        self._used = ctx.Semaphore(0)
        self._wpos = 0  # slots written (items and the end marker), producer side
        self._rpos = 0  # slots read, consumer side
        self.items_in = 0
        self.items_out = 0
        #: Rings of this process's ends (each process sets its own after the fork).
        self.tail: native.Ring | None = None
        self.head: native.Ring | None = None
        #: Path tags (each process sets its own after the fork): carried in the slot's header;
        #: at a path's origin the sampler of new tags, at its end the ring of arrivals.
        self._tags = False
        self._sampler: native.TagSampler | None = None
        self._arrive: native.Ring | None = None

    def keep_tags(self) -> None:
        """Carry each item's path tag (the putting thread's) to the thread that takes it."""
        self._tags = True

    def tag_departures(
        self, ring: native.Ring, every: int, min_gap_ticks: int = 0, seed: int = 1
    ) -> None:
        """A path's origin (producer side): tag one item in about ``every`` that carries none,
        recording each tag leaving into ``ring`` (as a thread FIFO's ``tag_departures``)."""
        self._tags = True
        self._sampler = native.TagSampler(ring, every, min_gap_ticks, seed)

    def tag_arrivals(self, ring: native.Ring) -> None:
        """A path's end (consumer side): record each tagged item taken into ``ring``."""
        self._tags = True
        self._arrive = ring

    def _write(self, kind: int, payload: bytes, tag: int = 0) -> None:
        off = (self._wpos % self.capacity) * self._stride
        _SLOT.pack_into(self._mem, off, len(payload), kind, tag)
        self._mem[off + _SLOT.size : off + _SLOT.size + len(payload)] = payload

    def put(self, item: Any) -> None:
        """Insert ``item``, waiting for a free slot (the calling thread's bound tracker marks
        it blocked on output meanwhile)."""
        kind, payload = encode_item(item)
        if len(payload) > self.slot_bytes:
            raise PipelineError(
                f"channel {self.name!r}: an item of {len(payload)} bytes does not fit its "
                f"{self.slot_bytes}-byte slots; pass slot_bytes= to connect()"
            )
        tracker = native.bound_tracker()
        if not self._free.acquire(False):
            prev = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
            self._free.acquire()
            if tracker is not None:
                tracker.set(prev)
        elif tracker is not None:
            tracker.heartbeat()
        tag, departing = 0, False
        if self._tags and kind != _T_EOS:
            tag = native.emit_tag()
            if tag == 0 and self._sampler is not None:
                tag = self._sampler.choose()
                departing = tag != 0
        self._write(kind, payload, tag)
        self._wpos += 1
        if kind != _T_EOS:
            self.items_in += 1
            tap = self.tail
            if departing:
                assert self._sampler is not None  # one clock read for both records
                self._sampler.depart(tag, None if tap is None else tap.record_stamp(self.items_in))
            elif tap is not None:
                tap.record(self.items_in)
        self._used.release()

    def get_within(self, timeout_s: float) -> tuple[bool, Any]:
        """``(True, item)``, or ``(False, None)`` when nothing came within ``timeout_s``."""
        if not self._used.acquire(True, timeout_s):
            return False, None
        return True, self._read()

    def get(self) -> Any:
        """Remove the next item, waiting for one (marked blocked on input meanwhile)."""
        tracker = native.bound_tracker()
        if not self._used.acquire(False):
            prev = tracker.set(State.BLOCKED_IN) if tracker is not None else 0
            self._used.acquire()
            if tracker is not None:
                tracker.set(prev)
        elif tracker is not None:
            tracker.heartbeat()
        return self._read()

    def _read(self) -> Any:
        off = (self._rpos % self.capacity) * self._stride
        length, kind, tag = _SLOT.unpack_from(self._mem, off)
        payload = bytes(self._mem[off + _SLOT.size : off + _SLOT.size + length])
        self._rpos += 1
        if kind != _T_EOS:
            self.items_out += 1
            tap = self.head
            if self._tags:
                native.take_tag(tag)
            if tag != 0 and self._arrive is not None:  # one clock read for both records
                if tap is not None:
                    self._arrive.record_at(tap.record_stamp(self.items_out), tag)
                else:
                    self._arrive.record(tag)
            elif tap is not None:
                tap.record(self.items_out)
        self._free.release()
        return decode_item(kind, payload)
