"""Per-stage function profiles from traced ENTER/EXIT records.

In: one tap's (one thread's) records at a time, already in nanoseconds and in time order, in
successive batches. Out: per (stage, function) call counts, inclusive, self and longest times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import Kind

_ENTER, _EXIT = int(Kind.ENTER), int(Kind.EXIT)


@dataclass(frozen=True, slots=True)
class FunctionProfile:
    """One function in one stage. ``total_ns`` is inclusive (a recursive function's nested calls
    are counted in each enclosing call), ``self_ns`` excludes its direct children's inclusive
    time, ``max_ns`` is its longest single call."""

    stage: str
    function: int
    calls: int
    total_ns: float
    self_ns: float
    max_ns: float

    def merge(self, other: FunctionProfile) -> FunctionProfile:
        """The same function's profile over both inputs (e.g. two runs, or two threads)."""
        if (self.stage, self.function) != (other.stage, other.function):
            raise ValueError("only profiles of the same stage and function merge")
        return FunctionProfile(
            self.stage,
            self.function,
            self.calls + other.calls,
            self.total_ns + other.total_ns,
            self.self_ns + other.self_ns,
            max(self.max_ns, other.max_ns),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FunctionProfile:
        return cls(
            str(d["stage"]),
            int(d["function"]),
            int(d["calls"]),
            float(d["total_ns"]),
            float(d["self_ns"]),
            float(d["max_ns"]),
        )


class ProfileBuilder:
    """Replays each key's call stack across batches.

    Memory is one open-call stack per key plus one accumulator per (key, function): bounded by
    stack depth and the number of distinct functions, never by the number of calls. An EXIT
    that does not close the innermost open call (its ENTER was refused, or came before the
    first batch) is counted in ``unmatched`` and skipped.
    """

    def __init__(self) -> None:
        self._stacks: dict[str, list[list[int]]] = {}  # key -> open [fid, enter_ns, child_ns]
        self._acc: dict[tuple[str, int], list[int]] = {}  # -> [calls, total, self, max]
        self.unmatched = 0
        self.open_at_end = 0

    def _close(self, key: str, stack: list[list[int]], t_ns: int) -> None:
        fid, t0, child = stack.pop()
        dur = t_ns - t0
        acc = self._acc.get((key, fid))
        if acc is None:
            self._acc[key, fid] = [1, dur, dur - child, dur]
        else:
            acc[0] += 1
            acc[1] += dur
            acc[2] += dur - child
            acc[3] = max(acc[3], dur)
        if stack:
            stack[-1][2] += dur

    def add(
        self,
        key: str,
        ticks_ns: NDArray[np.int64],
        kinds: NDArray[np.int64],
        fids: NDArray[np.int64],
    ) -> None:
        """One batch of one key's records, in time order (records of other kinds are ignored)."""
        stack = self._stacks.setdefault(key, [])
        # A Python loop over the records, on purpose: a call stack is a sequential machine whose
        # state crosses batches, and a trace batch is moderate (one tap's flush window).
        for t, kind, fid in zip(ticks_ns.tolist(), kinds.tolist(), fids.tolist(), strict=True):
            if kind == _ENTER:
                stack.append([fid, t, 0])
            elif kind == _EXIT:
                if stack and stack[-1][0] == fid:
                    self._close(key, stack, t)
                else:
                    self.unmatched += 1

    def finish(self, end_ns: int) -> None:
        """Close every call still open at ``end_ns`` (innermost first); they count as calls and
        in ``open_at_end``."""
        for key, stack in self._stacks.items():
            while stack:
                self.open_at_end += 1
                self._close(key, stack, end_ns)

    def profiles(self) -> list[FunctionProfile]:
        """Closed calls so far, sorted by stage, then inclusive time (longest first), then id."""
        out = [
            FunctionProfile(key, fid, a[0], float(a[1]), float(a[2]), float(a[3]))
            for (key, fid), a in self._acc.items()
        ]
        out.sort(key=lambda p: (p.stage, -p.total_ns, p.function))
        return out
