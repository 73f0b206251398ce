"""Signals to ``streamscope run`` of an app with hosts on a cluster it started: SIGTERM to the
command, or Ctrl-C (SIGINT to its whole process group, as a terminal sends it), ends the run
``interrupted`` within 2 s, the cluster stopped, nothing left running; while the cluster is
still starting, they end the command as well (Ray's own handler would drain each node for
30 s first)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

import streamscope as ss
from watched import Watched

APP = Path(__file__).parent / "apps" / "hosts_program.py"
#: From the signal to the command's end, mid-run: a cap against the waits that held it up
#: (Ray's 30 s drain per node, its one-by-one stop: 5.5-8.5 s), with room for a busy machine;
#: the time itself (about a second, the issue asks 2 s) is measured, not asserted to the ms.
LIMIT_S = 5.0
#: How long a test waits for the cluster to start and items to flow (a cap against hangs).
START_CAP_S = 120.0


def _send(w: Watched, how: str) -> None:
    if how == "SIGTERM":
        w.proc.send_signal(signal.SIGTERM)
    else:  # Ctrl-C at a terminal: the whole foreground process group
        os.killpg(w.proc.pid, signal.SIGINT)


def _wait_for(ready: Callable[[], bool], w: Watched) -> None:
    deadline = time.monotonic() + START_CAP_S
    while not ready():
        assert w.proc.poll() is None, w.proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["Ctrl-C"])
def test_a_signal_mid_run_ends_it_interrupted_within_two_seconds(
    start: Callable[..., Watched], tmp_path: Path, how: str
) -> None:
    out, marker = tmp_path / "run.duckdb", tmp_path / "flowing"
    w = start(str(APP), "--out", str(out), "--quiet", "--frame", "200ms",
              "--", "--items", "0", "--marker", str(marker))  # fmt: skip
    _wait_for(marker.exists, w)  # items went through every host
    time.sleep(1.0)  # a few frames, calibration bursts on the way
    t0 = time.monotonic()
    _send(w, how)
    _, err = w.proc.communicate(timeout=60)
    took = time.monotonic() - t0
    print(f"{how}: exit {w.proc.returncode} {took:.2f} s after the signal")
    assert w.proc.returncode == 130, err[-3000:]
    assert took <= LIMIT_S, err[-3000:]
    assert w.alive_after(5.0) == []
    with ss.load(out) as run:
        assert run.status == "interrupted"


@pytest.mark.parametrize("how", ["SIGTERM"])  # Ray's own handler drained 30 s per node
def test_a_signal_while_the_cluster_starts_ends_the_command_and_the_cluster(
    start: Callable[..., Watched], tmp_path: Path, how: str
) -> None:
    """The head node's raylet is up, the other nodes are still to come: the command ends as
    interrupted, every process Ray started there stopped (a signal that comes while Ray
    waits inside one of its calls acts when the call returns: up to ~2 s)."""
    w = start(str(APP), "--out", str(tmp_path / "run.duckdb"), "--quiet", "--", "--items", "0")

    def raylet() -> bool:
        try:
            kids = psutil.Process(w.proc.pid).children(recursive=True)
            return any("raylet" in " ".join(p.cmdline()[:1]) for p in kids)
        except psutil.Error:
            return False

    _wait_for(raylet, w)
    t0 = time.monotonic()
    _send(w, how)
    _, err = w.proc.communicate(timeout=20)  # Ray's own handler: 30 s before its exit
    print(f"{how}: exit {w.proc.returncode} {time.monotonic() - t0:.2f} s after the signal")
    assert w.proc.returncode == 130, err[-3000:]
    assert "Draining" not in err, err[-3000:]
    assert w.alive_after(5.0) == []
