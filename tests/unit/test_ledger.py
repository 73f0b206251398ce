"""The monitor's own accounting: the records each probe kept, per drop frame."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.reduction.ledger import Ledger


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-50, 5_000), max_size=12), max_size=6))
def test_each_probes_records_are_counted_in_their_drop_frames(batches: list[list[int]]) -> None:
    """Batches of a probe's record times, each in one frame or across several (a time before
    the run's start counts in its first frame), counted as a count per frame would: a
    drain's few records of a probe, all in one frame, take the short way."""
    ledger = Ledger(1_000)
    truth: Counter[tuple[int, int]] = Counter()
    for k, times in enumerate(batches):
        pid = k % 3
        t = np.sort(np.array(times, dtype=np.int64))
        ledger.kept(pid, t)
        truth.update((pid, max(x, 0) // 1_000) for x in times)
    got = {(d.probe_id, d.frame): d.recorded for d in ledger.close(0, 10_000)}
    assert got == {k: v for k, v in truth.items() if v}
