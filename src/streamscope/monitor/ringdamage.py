"""What the monitor makes of rings something else overwrote: the records no ring can hold,
dropped and counted as their ring's damage, and each damaged ring's note for the run file.

In: one domain's records of a drain, ring by ring (``transport.ringreader.RingReader`` counts
what it found wrong with positions and words itself), and the probes the run declared. Out: the
records kept, the damage added to each reader's ``damage``, and ``note`` rows (``damaged``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from streamscope.core.records import Records
from streamscope.transport.ringreader import KIND, POSITIONS, RingReader, known_kinds

#: What ``RingReader.damage`` counts besides the reader's own: records of a probe the run never
#: declared (dropped, one each).
PROBE = "records of an unknown probe"
#: The ``note`` rows' ``about`` for a damaged ring.
DAMAGED = "damaged"


def sound(
    parts: list[tuple[RingReader, Records]],
    declared: Callable[[], Any],
    rescan: Callable[[], object],
) -> Records:
    """One domain's records of a drain, each ring's together, but those a ring cannot hold: of
    an unknown kind, or of a probe neither the ring's own nor one the run declared
    (``declared()``: their ids; shared storage writes several probes' records into one ring).
    Those are dropped and counted as their ring's damage. One pass over the whole batch, not
    one per ring; ``rescan`` reads the run's journal again before a probe is judged unknown
    (a probe's declaration is written before its first record, and may be newer than the
    drain's scan)."""
    recs = np.concatenate([p for _, p in parts]) if len(parts) > 1 else parts[0][1]
    sizes = [len(p) for _, p in parts]
    probes = recs["probe"]
    kinds_ok = known_kinds(recs)
    ok = kinds_ok & (probes == np.repeat([r.probe for r, _ in parts], sizes))
    for again in (False, True):
        if ok.all():
            return recs
        if again:
            rescan()
        ok |= kinds_ok & np.isin(probes, declared())
    if ok.all():
        return recs
    starts = np.cumsum([0, *sizes[:-1]])
    bad_kind = np.add.reduceat(~kinds_ok, starts).tolist()
    bad = np.add.reduceat(~ok, starts).tolist()
    for (reader, _), k, b in zip(parts, bad_kind, bad, strict=True):
        damage = reader.damage
        if k:
            damage[KIND] = damage.get(KIND, 0) + k
        if b - k:
            damage[PROBE] = damage.get(PROBE, 0) + b - k
    kept: Records = recs[ok]
    return kept


def damage_text(name: str, probe: int, pid: int, damage: dict[str, int]) -> str:
    """A damaged ring's note, e.g. ``ring 12-0.ring of process 12 (probe 7) was damaged:
    positions out of bounds: 1 time, records of an unknown kind: 612 dropped``."""
    parts = [
        f"{what}: {n} dropped" if what.startswith("records")
        else f"{what}: {n} time{'s' if n != 1 else ''}"
        for what, n in sorted(damage.items())
    ]  # fmt: skip
    lost = " (what it held then was lost)" if POSITIONS in damage else ""
    return f"ring {name} of process {pid} (probe {probe}) was damaged: {', '.join(parts)}{lost}"
