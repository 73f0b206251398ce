"""Integration-test app: ``src -> work -> sink``, the source emitting one item every ``--gap-ms``.

``--items 0`` never ends; ``--fail-at K`` makes ``work`` divide by zero on item K, ``--hang-at K``
never return from it; ``--marker PATH``
is written when the source starts, so a test can tell whether anything ran at all.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import streamscope as ss

QUERIES = ["occupancy(src -> work): mean, max every 100ms"]


def source(items: int, gap_s: float, marker: Path | None):  # type: ignore[no-untyped-def]
    if marker is not None:
        marker.write_text("started\n")
    k = 0
    while items == 0 or k < items:
        time.sleep(gap_s)
        yield k
        k += 1


class Work:
    def __init__(self, fail_at: int, hang_at: int = -1) -> None:
        self.fail_at = fail_at
        self.hang_at = hang_at

    def process(self, item: int) -> int:
        if item == self.fail_at:
            return item // 0  # the planned failure: tests look for this line
        while item == self.hang_at:  # the planned hang: never returns
            time.sleep(0.05)
        return item


def pipeline(argv: list[str]) -> ss.Pipeline:
    ap = argparse.ArgumentParser(prog="steady.py")
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--gap-ms", type=float, default=2.0)
    ap.add_argument("--fail-at", type=int, default=-1)
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--work-resource", choices=("thread", "process"), default="thread")
    ap.add_argument("--marker", type=Path)
    a = ap.parse_args(argv)
    p = ss.Pipeline("steady")
    p.add("src", lambda: source(a.items, a.gap_ms / 1000, a.marker))
    p.add("work", Work(a.fail_at, a.hang_at), resource=a.work_resource)
    p.add("sink", lambda item: None)
    p.chain("src", "work", "sink", capacity=8)
    return p
