"""A channel's latency uncertainty: every frame whose records came in a batch placed in time
within some bounds carries those bounds, however many advances it takes to reach them."""

from __future__ import annotations

import numpy as np

from streamscope.reduction.channelstream import ChannelEnd, ChannelStream


def _add(end: ChannelEnd, times: list[int], seqs: list[int], halfwidth: float) -> None:
    end.halfwidth_ns = halfwidth
    end.add(np.array(times, dtype=np.int64), np.array(seqs, dtype=np.int64))


def test_records_reduced_over_several_advances_keep_their_batchs_bounds() -> None:
    """One batch per end (as at the end of a run): items inserted at 100, 1100, 2100 and
    removed 50 ns later, placed within ±300 ns (tail) and ±200 ns (head). Each of three
    advances reduces one item, and each must say ±500 ns: the bounds were noted once, with
    the batch, not with each advance."""
    ch = ChannelStream("a -> b")
    tail, head = ChannelEnd(ch, "tail"), ChannelEnd(ch, "head")
    _add(tail, [100, 1100, 2100], [1, 2, 3], 300.0)
    _add(head, [150, 1150, 2150], [1, 2, 3], 200.0)
    outs = [ch.advance(until) for until in (1000, 2000, 3000)]
    assert [len(o.latency.value) for o in outs] == [1, 1, 1]
    assert [o.uncertainty_ns for o in outs] == [500.0, 500.0, 500.0]
    # Past the batch, nothing is uncertain any more: no record is left to place.
    assert ch.advance(4000).uncertainty_ns == 0.0


def test_a_later_batch_with_wider_bounds_widens_only_the_spans_it_reaches() -> None:
    ch = ChannelStream("a -> b")
    tail, head = ChannelEnd(ch, "tail"), ChannelEnd(ch, "head")
    _add(tail, [100], [1], 100.0)
    _add(head, [150], [1], 100.0)
    _add(tail, [5100], [2], 4000.0)
    _add(head, [5150], [2], 100.0)
    first, second = ch.advance(1000), ch.advance(6000)
    assert first.uncertainty_ns == 200.0
    assert second.uncertainty_ns == 4100.0
