"""The monitor's ring set over rings something else overwrote: what a ring cannot hold is dropped,
counted as that ring's damage and named in the run's notes; the other rings are read as ever."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streamscope.core import native, rings
from streamscope.core.records import Kind
from streamscope.monitor.ringdamage import DAMAGED
from streamscope.monitor.ringset import RingSet
from streamscope.probes.taps import Recorder

HEADER, SLOT = rings.HEADER_BYTES, rings.RECORD_BYTES


def _set(tmp_path: Path, *probes: int) -> tuple[RingSet, Recorder, dict[int, Any]]:
    """A ring per probe (PUT records), the probes declared to the ring set as the run's."""
    rec = Recorder(str(tmp_path), capacity=16)
    taps = {p: rec.tap(p, Kind.PUT) for p in probes}
    topology: Any = SimpleNamespace(probes=[SimpleNamespace(id=p, domain="host") for p in probes])
    rs = RingSet(str(tmp_path), topology)
    assert rs.scan() == len(probes)
    return rs, rec, taps


def _files(directory: Path) -> dict[int, str]:
    """The ring files by the probe in their header."""
    return {
        struct.unpack_from("<q", f.read_bytes(), rings.W_PROBE * 8)[0]: f.name
        for f in directory.glob(f"*{rings.SUFFIX}")
    }


def _values(drain: Any) -> list[tuple[int, int]]:
    return [
        (p, v)
        for part in drain.records.get("host", [])
        for p, v in zip(part["probe"].tolist(), part["value"].tolist(), strict=True)
    ]


def test_records_no_probe_writes_are_dropped_counted_and_named(tmp_path: Path) -> None:
    rs, _, taps = _set(tmp_path, 1, 2)
    for v in range(6):
        taps[1].ring.record_at(100 + v, v)
        taps[2].ring.record_at(100 + v, 10 + v)
    # Overwrite ring 1's records not drained yet: two of no kind, one of a probe the run never
    # declared, one of probe 2 (declared: shared storage writes other probes' records).
    for slot, kind, probe in ((1, 0, 1), (2, 99, 1), (3, int(Kind.PUT), 777), (4, 1, 2)):
        struct.pack_into("<II", taps[1].mem, HEADER + slot * SLOT, kind, probe)
    d = rs.drain()
    assert _values(d) == [(1, 0), (2, 4), (1, 5), *((2, 10 + v) for v in range(6))]
    assert d.n_records == 9
    notes = rs.damage_notes()
    assert [a for a, _ in notes] == [DAMAGED]
    text = notes[0][1]
    assert text.startswith(f"ring {_files(tmp_path)[1]} of process ")
    assert "(probe 1) was damaged" in text
    assert "records of an unknown kind: 2 dropped" in text
    assert "records of an unknown probe: 1 dropped" in text
    # Ring 2 lost nothing; ring 1 is read on as ever.
    taps[1].ring.record_at(200, 99)
    assert _values(rs.drain()) == [(1, 99)]
    assert len(rs.damage_notes()) == 1


def test_a_ring_whose_positions_were_overwritten_is_read_on_and_the_end_comes(
    tmp_path: Path,
) -> None:
    rs, _, taps = _set(tmp_path, 1, 2)
    taps[2].ring.record_at(100, 7)
    struct.pack_into("<q", taps[1].mem, rings.W_W * 8, 1 << 62)  # far past what it holds
    assert rs.pending() == 1  # ring 1's count is none, not 2**62: the final drains end
    assert _values(rs.drain()) == [(2, 7)]
    assert rs.pending() == 0
    taps[1].ring.record_at(101, 8)  # the writer goes on from where it was sent
    assert _values(rs.drain()) == [(1, 8)]
    ((about, text),) = rs.damage_notes()
    assert about == DAMAGED
    assert "positions out of bounds: 1 time" in text and "(what it held then was lost)" in text


def test_a_ring_overwritten_before_it_was_found_is_named(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path), capacity=16)
    tap = rec.tap(1, Kind.PUT)
    struct.pack_into("<q", tap.mem, rings.W_MAGIC * 8, 12345)
    rs = RingSet(str(tmp_path), SimpleNamespace(probes=[]))  # type: ignore[arg-type]
    assert rs.scan() == 0
    ((about, text),) = rs.damage_notes()
    assert about == DAMAGED
    assert text.endswith("could not be read: not a streamscope ring (bad magic)")


@pytest.mark.skipif(
    native.IMPLEMENTATION != "native", reason="only the native core answers a SIGBUS"
)
def test_a_ring_truncated_under_the_monitor_reads_as_zeros_and_is_named(tmp_path: Path) -> None:
    """Reading a mapping past its file's end is a SIGBUS: the reader's guard maps zeros there,
    and the ring is named as cut short; the other ring is read as ever."""
    rs, _, taps = _set(tmp_path, 1, 2)
    taps[1].ring.record_at(100, 1)
    taps[2].ring.record_at(100, 2)
    assert _values(rs.drain()) == [(1, 1), (2, 2)]
    os.truncate(tmp_path / _files(tmp_path)[1], 0)  # ring 1's writer writes no more
    taps[2].ring.record_at(101, 3)
    assert _values(rs.drain()) == [(2, 3)]
    ((about, text),) = rs.damage_notes()
    assert about == DAMAGED
    assert "(probe 1) was damaged: file truncated: 1 time" in text
