"""Integration-test app over three hosts: ``src`` on node-a, ``work`` on node-b, ``sink`` on
node-c, the source emitting one item every ``--gap-ms``.

``--items 0`` never ends; ``--work-ms`` is the work per item. ``--marker PATH`` is written by
the sink at its first item (items flow across every host), and by the source once it made its
last (``PATH`` with ``.done`` added).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import streamscope as ss

HOSTS = ("node-a", "node-b", "node-c")
QUERIES = ["throughput(* -> *) every 200ms"]


def source(items: int, gap_s: float, marker: Path | None):  # type: ignore[no-untyped-def]
    k = 0
    while items == 0 or k < items:
        time.sleep(gap_s)
        yield k
        k += 1
    if marker is not None:
        marker.with_name(marker.name + ".done").write_text("made\n")


class Work:
    def __init__(self, work_s: float) -> None:
        self.work_s = work_s

    def process(self, item: int) -> int:
        time.sleep(self.work_s)
        return item


class Sink:
    def __init__(self, marker: Path | None) -> None:
        self.marker = marker

    def process(self, item: int) -> None:
        if self.marker is not None and not self.marker.exists():
            self.marker.write_text("flowing\n")


def pipeline(argv: list[str]) -> ss.Pipeline:
    ap = argparse.ArgumentParser(prog="hosts_program.py")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    ap.add_argument("--work-ms", type=float, default=0.0)
    ap.add_argument("--capacity", type=int, default=8)
    ap.add_argument("--marker", type=Path)
    a = ap.parse_args(argv)
    host = {h: ss.Host(h) for h in HOSTS}
    p = ss.Pipeline("hosts_program")
    p.add("src", lambda: source(a.items, a.gap_ms / 1000, a.marker), resource=host["node-a"])
    p.add("work", Work(a.work_ms / 1000), resource=host["node-b"])
    p.add("sink", Sink(a.marker), resource=host["node-c"])
    p.chain("src", "work", "sink", capacity=a.capacity)
    return p
