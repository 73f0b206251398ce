"""The running extreme behind the min, max, first and last accumulators: (key, value) pairs in,
the value whose key lies furthest in one direction out; merging keeps the further one.
"""

from __future__ import annotations

from streamscope.aggregate._merge import same_kind
from streamscope.aggregate.points import Point, ScalarPoint

__all__ = ["RunningExtreme"]


class RunningExtreme:
    """The value whose key is the smallest (``largest = False``) or the largest (``largest =
    True``) seen; ties of key keep the larger value, so the result never depends on the order of
    batches or merges. ``None`` until something is taken.

    Subclasses set ``stat`` and ``largest`` and feed :meth:`offer` from their batches: min and max
    take each batch's extreme value as its own key, first and last the value at the extreme time.
    """

    __slots__ = ("_key", "_value")
    stat = ""
    largest = False

    def __init__(self) -> None:
        self._key: float | None = None
        self._value: float | None = None

    def offer(self, key: float, value: float) -> None:
        """Keep ``value`` if ``key`` lies beyond the kept one (or ties it with a larger value)."""
        if self._key is None or (key > self._key if self.largest else key < self._key):
            self._key, self._value = key, value
        elif key == self._key and self._value is not None:
            self._value = max(self._value, value)

    def collect(self) -> Point:
        return ScalarPoint(self.stat, self._value)

    def merge(self, other: object) -> None:
        """Fold ``other`` (same class, else ValueError) into this one."""
        o = same_kind(self, other)
        if o._key is not None and o._value is not None:
            self.offer(o._key, o._value)
