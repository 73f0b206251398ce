"""The calibrator's bursts, in order, over in-memory clock links (no process, no socket)."""

from __future__ import annotations

import threading

import numpy as np

from streamscope.pipeline.run.calibrator import Calibrator
from streamscope.timebase.burst import Exchanges
from streamscope.transport.channels import InMemoryTransport
from streamscope.transport.control import Control


class _Link:
    """A clock link that answers at once and notes each burst's size."""

    full = 300
    short = 60

    def __init__(self, name: str, log: list[tuple[str, int]], lock: threading.Lock) -> None:
        self.name, self.log, self.lock = name, log, lock

    def exchange(self, n: int) -> Exchanges:
        with self.lock:
            self.log.append((self.name, n))
        t = np.arange(n, dtype=np.int64) * 1000
        return Exchanges(t1_ns=t, t2_ticks=t + 500, t3_ns=t + 1000)

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Sink:
    def put(self, item: bytes | None, /) -> None:
        pass


def _first_bursts(names: list[str]) -> list[tuple[str, int]]:
    log: list[tuple[str, int]] = []
    lock = threading.Lock()
    control = Control(InMemoryTransport(_Sink()))
    domains = [(i, n, _Link(n, log, lock)) for i, n in enumerate(names)]
    cal = Calibrator(control, domains, every_s=0)  # type: ignore[arg-type]
    cal.start()
    cal.stop()
    return log


def test_every_domain_of_many_gets_a_short_burst_before_any_full_one() -> None:
    assert _first_bursts(["a", "b", "c"]) == [
        ("a", 60), ("b", 60), ("c", 60), ("a", 300), ("b", 300), ("c", 300),
    ]  # fmt: skip


def test_a_single_domain_starts_with_its_full_burst() -> None:
    assert _first_bursts(["dev"]) == [("dev", 300)]
