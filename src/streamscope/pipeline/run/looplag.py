"""An event loop's lag: now and then, how late the loop runs a callback that was due.

In: a running event loop and where each lag goes (a timer probe's ``lapse``, a ring's
``record``). Out: one lag in ns every ``LAG_EVERY_S`` on average, until ``stop``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

#: How often a loop's lag is sampled on average (s).
LAG_EVERY_S = 0.05


class LagSampler:
    """Samples ``loop``'s lag into ``lapse`` (ns), at a random phase: a program that blocks its
    loop periodically is not sampled only between its blocks."""

    def __init__(self, loop: asyncio.AbstractEventLoop, lapse: Callable[[int], object]) -> None:
        self.loop = loop
        self.lapse = lapse
        self.running = True
        self.rng = random.Random()
        due = loop.time() + LAG_EVERY_S
        loop.call_at(due, self.tick, due)

    def tick(self, due: float) -> None:
        if not self.running:
            return
        now = self.loop.time()
        self.lapse(max(round((now - due) * 1e9), 0))
        due = now + LAG_EVERY_S * (0.5 + self.rng.random())
        self.loop.call_at(due, self.tick, due)

    def stop(self) -> None:
        self.running = False


__all__ = ["LAG_EVERY_S", "LagSampler"]
