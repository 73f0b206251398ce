"""The flight recorder keeps the latest records in bounded memory and counts what it let go."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.core.records import make_records
from streamscope.monitor.flight import FlightRecorder


def _recs(lo: int, hi: int) -> np.ndarray:
    t = np.arange(lo, hi, dtype=np.int64)
    return make_records(3, 1, t, t)


@pytest.mark.parametrize("chunks", [[7], [3, 4, 5], [1] * 12, [20], [10, 10], [0, 9, 0, 3]])
def test_it_keeps_the_latest_in_order(chunks: list[int]) -> None:
    fr = FlightRecorder(10)
    at = 0
    for n in chunks:
        fr.add(_recs(at, at + n))
        at += n
    kept = fr.records()["ticks"].tolist()
    assert kept == list(range(max(at - 10, 0), at))
    assert fr.seen == at
    assert fr.overwritten == max(at - 10, 0)


def test_none_kept_when_off() -> None:
    fr = FlightRecorder(0)
    fr.add(_recs(0, 5))
    assert len(fr.records()) == 0 and fr.seen == 5 and fr.overwritten == 5
    with pytest.raises(ValueError, match="0 or more"):
        FlightRecorder(-1)
