"""Runs of the real ``streamscope run`` in a subprocess, watched: every process they start is
seen, so a test can tell which is the monitor and that none is left behind.

``start`` (a fixture, tests/integration/conftest.py) launches them; ``start_steady`` runs the
endless steady app; ``wait_for_frames`` reads the live view until frames were printed.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from oracles import is_monitor

APP = Path(__file__).parent / "integration" / "apps" / "steady.py"
#: A line of the live view when stdout is not a terminal: ``[  300ms] q0 src -> work: ...``.
FRAME_LINE = re.compile(r"^\[\s*[\d.]+\w*\] q0 src -> work: ")


def cli() -> list[str]:
    script = Path(sys.executable).with_name("streamscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamscope"]


@dataclass
class Watched:
    """A ``streamscope run`` in its own session, with every descendant it ever had."""

    proc: subprocess.Popen[str]
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def watch(self) -> None:
        """Collect descendants until the CLI exits (a forked stage may live only briefly)."""
        try:
            root = psutil.Process(self.proc.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set() and self.proc.poll() is None:
            try:
                for child in root.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                return
            time.sleep(0.01)

    def stop_watching(self) -> None:
        self._stop.set()

    def monitor(self) -> psutil.Process:
        for p in self.seen.values():
            if is_monitor(p):
                return p
        raise AssertionError(f"no monitor process among {sorted(self.seen)}")

    def alive_after(self, grace_s: float) -> list[str]:
        """Descendants still running (zombies aside) once ``grace_s`` has passed."""
        deadline = time.monotonic() + grace_s
        while True:
            alive = []
            for p in self.seen.values():
                try:
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        alive.append(f"{p.pid} {' '.join(p.cmdline())}")
                except psutil.NoSuchProcess:
                    continue
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)


def start_steady(
    start: Callable[..., Watched], out: Path, resource: str, gap_ms: int = 5, *extra: str
) -> Watched:
    """``streamscope run`` of the endless steady app with 100 ms frames into ``out``."""
    return start(
        str(APP), "--frame", "100ms", "--out", str(out), "--",
        "--items", "0", "--gap-ms", str(gap_ms), "--work-resource", resource, *extra,
    )  # fmt: skip


def wait_for_frames(w: Watched, n: int) -> list[str]:
    """Read the live view until ``n`` frames of q0 were printed; returns the lines read (a run
    that never prints them is ended by the suite's per-test timeout, not by a clock here)."""
    assert w.proc.stdout is not None
    lines: list[str] = []
    seen = 0
    for line in w.proc.stdout:
        lines.append(line)
        if FRAME_LINE.match(line):
            seen += 1
            if seen >= n:
                return lines
    raise AssertionError(f"the run ended after {seen} frames: {''.join(lines)}")


def starter() -> Iterator[Callable[..., Watched]]:
    """``start(*args)`` launches ``streamscope run`` watched; whatever is left is killed after."""
    started: list[Watched] = []

    def _start(*args: str) -> Watched:
        proc = subprocess.Popen(
            [*cli(), "run", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        w = Watched(proc)
        threading.Thread(target=w.watch, daemon=True).start()
        started.append(w)
        return w

    yield _start
    for w in started:
        w.stop_watching()
        if w.proc.poll() is None:
            w.proc.kill()
        for p in w.seen.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        w.proc.communicate(timeout=10)
