"""Records of one kind waiting to be folded into frames: chunks of (ticks, value) integer arrays
in, the records below a tick limit out (sorted by ticks), the rest kept for later.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["PendingRecords"]

I64 = NDArray[np.int64]


class PendingRecords:
    """(ticks, value) chunks of one record kind not yet folded into frames.

    Chunks should come in time order; if they do not, the records are sorted (stably) before
    they are folded, rather than refused: a monitor must not fail on a misordered drain.
    Mutable: chunks arrive one call at a time and leave once their frames close.
    """

    __slots__ = ("last", "name", "ordered", "t", "v")

    def __init__(self, name: str) -> None:
        self.name = name
        self.t: list[I64] = []
        self.v: list[I64] = []
        self.last: int | None = None
        self.ordered = True

    def add(self, ticks: ArrayLike, values: ArrayLike) -> None:
        t = np.asarray(ticks).reshape(-1)
        v = np.asarray(values).reshape(-1)
        if t.dtype.kind not in "iu" or v.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: ticks and values must be integer arrays")
        if t.shape != v.shape:
            raise ValueError(f"{self.name}: {t.size} ticks but {v.size} values")
        if not t.size:
            return
        t = t.astype(np.int64)
        if bool(np.any(np.diff(t) < 0)) or (self.last is not None and int(t[0]) < self.last):
            self.ordered = False
        self.t.append(t)
        self.v.append(v.astype(np.int64))
        self.last = int(t[-1]) if self.last is None else max(self.last, int(t.max()))

    def pop_before(self, limit: int) -> tuple[I64, I64]:
        """The records with ticks < ``limit``; the rest stay."""
        if not self.t:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t = np.concatenate(self.t) if len(self.t) > 1 else self.t[0]
        v = np.concatenate(self.v) if len(self.v) > 1 else self.v[0]
        if not self.ordered:
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
            self.ordered = True
        n = int(np.searchsorted(t, limit, side="left"))
        self.t = [t[n:]] if n < t.size else []
        self.v = [v[n:]] if n < t.size else []
        return t[:n], v[:n]

    def clear(self) -> None:
        self.t, self.v = [], []

    def top(self, limit: int) -> int:
        """The largest value held of a record with ticks < ``limit`` (0 if none)."""
        return max(
            (int(v[t < limit].max(initial=0)) for t, v in zip(self.t, self.v, strict=True)),
            default=0,
        )

    def __len__(self) -> int:
        return sum(c.size for c in self.t)
