"""One frame of a virtual queue replayed: inter-insertion gaps and service times (ns) and the
levels at the frame start in; the ns spent at each level by the whole queue and by its tail
(producer's side) and head (consumer's side) sub-queues out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.bulk import tandem_bulk
from streamscope.model.occupancy import occupancy_from_events
from streamscope.model.recursions import KERNELS, lindley_fifo

__all__ = [
    "Bus",
    "Model",
    "SubQueues",
    "as_level",
    "replay_inserted",
    "simulate_frame",
    "tandem_py",
]

Model = Literal["ideal", "tandem"]

#: The compiled tandem replication (None where the extension was not built, or was built
#: before it was).
TANDEM_FRAME = getattr(KERNELS, "tandem_frame", None)


@dataclass(frozen=True, slots=True)
class Bus:
    """The bulk-transfer bus of the "tandem" model (see :func:`~streamscope.model.tandem_bulk`):
    up to ``bulk_size`` items per transfer of ``transfer_ns``, flushed after ``timeout_ns`` idle;
    items reach the head side ``latency_ns`` after their transfer ends (pipelined: the bus is
    busy only for the transfer), into a buffer of ``capacity2`` places (None: unbounded; else a
    transfer whose items do not fit on arrival is held, and the bus with it, until they do)."""

    bulk_size: int
    transfer_ns: float
    timeout_ns: float = math.inf
    latency_ns: float = 0.0
    capacity2: int | None = None


class SubQueues(NamedTuple):
    """ns spent at each level ``0, 1, ...`` over one frame (index = level).

    A virtual queue may run host -> device or device -> host; its sub-queues are named by side:
    the tail is the buffer at the producer's side, the head the buffer at the consumer's side.
    """

    whole: F64  #: insertion .. departure (the virtual queue)
    tail: F64  #: insertion .. start of its bus transfer (always 0 in the "ideal" model)
    head: F64  #: delivery to the consumer's side .. departure


def as_level(name: str, value: int) -> int:
    """Items in a sub-queue at the frame start, checked (an integer >= 0)."""
    if int(value) != value or value < 0:
        raise ModelInputError(
            f"{name} must be an integer >= 0 (items at the frame start), got {value!r}"
        )
    return int(value)


def _windows(windows: tuple[float, float] | None, frame_ns: float) -> tuple[float, float]:
    if windows is None:
        return frame_ns, frame_ns
    tail_ns, head_ns = (float(w) for w in windows)
    if not (0.0 < tail_ns <= frame_ns and 0.0 < head_ns <= frame_ns):
        raise ModelInputError(
            f"windows must be in (0, frame_ns={frame_ns}] ns, got ({tail_ns}, {head_ns})"
        )
    return tail_ns, head_ns


def _items(at: F64, service: ArrayLike, frame_ns: float, tail0: int, head0: int) -> tuple[F64, F64]:
    """Insertion and service times (ns) of every item of the frame: the start items (at 0),
    then those inserted (at ``at``, ns) before ``frame_ns``."""
    s = np.asarray(service, dtype=np.float64)
    n = int(np.searchsorted(at, frame_ns, side="left"))
    k0 = tail0 + head0
    if s.ndim != 1 or s.size < k0 + n:
        raise ModelInputError(
            f"service: need {k0 + n} values ({head0} head + {tail0} tail items at the start, "
            f"{n} inserted), got {s.size}"
        )
    return np.concatenate((np.zeros(k0), at[:n])), s[: k0 + n]


def _ideal(a: F64, s: F64, frame_ns: float, tail_ns: float, head_ns: float) -> SubQueues:
    # Removed when its service starts: d_k - s_k = max(a_k, d_{k-1}).
    removed = lindley_fifo(a, s) - s
    whole = occupancy_from_events(a, removed, 0.0, frame_ns)[1]
    head = whole if head_ns == frame_ns else occupancy_from_events(a, removed, 0.0, head_ns)[1]
    return SubQueues(whole, np.array([tail_ns]), head)


def _tandem(
    a: F64, s: F64, bus: Bus, head0: int, end_ns: float, windows: tuple[float, float, float]
) -> SubQueues:
    """The "tandem" model's levels: compiled in one call (``TANDEM_FRAME``: the bus, its
    items' times and the three occupancies, the same operations in the same order) where it
    was built and the device buffer is bounded, else :func:`tandem_py`."""
    if TANDEM_FRAME is None or type(bus.bulk_size) is not int or type(bus.capacity2) is not int:
        return tandem_py(a, s, bus, head0, end_ns, windows)
    frame_ns, tail_ns, head_ns = windows
    n = a.size
    out = np.empty((3, n + 1))
    # One call per replication, not a dozen (a frame runs some 80): None where an input is
    # one tandem_py's checks report, or its events are not of the kind the compiled path takes.
    keep = TANDEM_FRAME(
        a, np.ascontiguousarray(s), head0, bus.bulk_size, bus.bulk_size, float(bus.transfer_ns), 0.0,
        float(bus.timeout_ns), float(bus.latency_ns), float(end_ns), bus.capacity2,
        float(frame_ns), float(tail_ns), float(head_ns), out,
    )  # fmt: skip
    if keep is None:
        return tandem_py(a, s, bus, head0, end_ns, windows)
    kw, kt, kh = keep
    return SubQueues(out[0, :kw].copy(), out[1, :kt].copy(), out[2, :kh].copy())


def tandem_py(
    a: F64, s: F64, bus: Bus, head0: int, end_ns: float, windows: tuple[float, float, float]
) -> SubQueues:
    """The "tandem" model's levels over ``windows`` (``(frame_ns, tail_ns, head_ns)``) from
    every item's insertion ``a`` and service ``s`` (ns; the first ``head0`` already on the
    head side): :func:`~streamscope.model.bulk.tandem_bulk`, then the three occupancies; the
    compiled ``tandem_frame``'s reference, and what runs where it was not built."""
    frame_ns, tail_ns, head_ns = windows
    t = tandem_bulk(
        a,
        bus.bulk_size,
        bus.transfer_ns,
        bus.timeout_ns,
        s,
        bus.capacity2,
        end_ns=end_ns,
        latency_ns=bus.latency_ns,
        preloaded=head0,
    )
    return SubQueues(
        occupancy_from_events(a, t.start2, 0.0, frame_ns)[1],
        occupancy_from_events(a, t.start1, 0.0, tail_ns)[1],
        occupancy_from_events(t.deliver, t.start2, 0.0, head_ns)[1],
    )


def simulate_frame(
    gaps: ArrayLike,
    service: ArrayLike,
    frame_ns: float,
    model: Model,
    bus: Bus | None = None,
    *,
    start_tail: int = 0,
    start_head: int = 0,
    windows: tuple[float, float] | None = None,
    ended: bool = False,
) -> SubQueues:
    """Replay one frame: inter-insertion ``gaps`` and per-item ``service`` (ns) in, the ns at
    each level of the whole queue and of its tail and head sub-queues over ``[0, frame_ns)`` out.

    Item ``k`` is inserted at ``a_k = gaps_0 + ... + gaps_k``; only items with ``a_k < frame_ns``
    take part. ``start_tail``/``start_head`` items are already in the tail/head sub-queue at the
    frame start (time 0), ahead of the inserted ones: the head items were delivered at 0, the
    tail items inserted at 0. ``service`` holds one time per item in service order: the head
    items', then the tail items', then the inserted items' (so at least
    ``start_head + start_tail + #inserted`` values).

    An item is in the queue from its insertion until its consumer removes it, which is when
    its service starts (as for every channel: the item being served is not in the channel).
    The consumer removes the next item when it has served the previous one, so the gaps between
    back-to-back removals are the service times. "ideal": one FIFO served in order, service
    finishing at ``d_k = max(a_k, d_{k-1}) + s_k`` and removal at ``d_k - s_k``, starting with
    ``start_tail + start_head`` items at 0; the tail sub-queue is empty and the head sub-queue
    is the whole queue. "tandem": tail buffer, then ``bus``, then the head buffer and its server
    (removal at the service start); the head items skip the bus; the bus's last partial batch
    is flushed at ``frame_ns``.

    ``windows``: ``(tail_ns, head_ns)``, each in ``(0, frame_ns]``: the tail and head
    sub-queues over ``[0, tail_ns)`` and ``[0, head_ns)`` instead (where a side measured less
    of the frame than the whole queue is estimated over). ``ended``: the stream ends with the
    last insertion (the producer finished in this frame), so the bus flushes its partial batch
    then rather than at ``frame_ns``.
    """
    at = np.cumsum(np.asarray(gaps, dtype=np.float64))
    return replay_inserted(
        at, service, frame_ns, model, bus, start_tail=start_tail, start_head=start_head,
        windows=windows, ended=ended,
    )  # fmt: skip


def replay_inserted(
    at: F64,
    service: ArrayLike,
    frame_ns: float,
    model: Model,
    bus: Bus | None = None,
    *,
    start_tail: int = 0,
    start_head: int = 0,
    windows: tuple[float, float] | None = None,
    ended: bool = False,
) -> SubQueues:
    """:func:`simulate_frame` from the insertion times ``at`` (ns: the gaps' running sum,
    ``np.cumsum(gaps)``) rather than the gaps, for a caller that has taken that sum already."""
    tail_ns, head_ns = _windows(windows, frame_ns)
    tail0 = as_level("start_tail", start_tail)
    head0 = as_level("start_head", start_head)
    a, s = _items(at, service, frame_ns, tail0, head0)
    if model == "ideal":
        return _ideal(a, s, frame_ns, tail_ns, head_ns)
    if model != "tandem":
        raise ModelInputError(f"model must be 'ideal' or 'tandem', got {model!r}")
    if bus is None:
        raise ModelInputError("the 'tandem' model needs a Bus")
    if a.size == 0:
        return SubQueues(np.array([frame_ns]), np.array([tail_ns]), np.array([head_ns]))
    end_ns = float(a[-1]) if ended else frame_ns
    return _tandem(a, s, bus, head0, end_ns, (frame_ns, tail_ns, head_ns))
