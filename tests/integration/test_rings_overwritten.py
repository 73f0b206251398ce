"""A run whose rings another process overwrites halfway: the monitor drops what it cannot trust,
names each damaged ring in the run's notes, and reads on; the program's run is whole."""

from __future__ import annotations

import random
import struct
import subprocess
import time
from pathlib import Path

import streamscope as ss
from streamscope.core import rings
from streamscope.core.records import Kind
from watched import cli

APP = Path(__file__).parent / "apps" / "overwritten_rings.py"
N = 200  # the app's items per half


def _words(path: Path) -> tuple[int, ...]:
    with open(path, "rb") as f:
        return struct.unpack("<24q", f.read(192))


def _until(proc: subprocess.Popen[str], ready: object) -> None:
    """Poll ``ready`` (a callable) until it holds; the run must not end first."""
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.005)


def test_rings_overwritten_mid_run_are_named_and_the_run_reads_on(tmp_path: Path) -> None:
    out = tmp_path / "run.duckdb"
    proc = subprocess.Popen(
        [*cli(), "run", str(APP), "-o", str(out), "--quiet", "--", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _until(proc, (tmp_path / "rings").exists)
        ring_dir = Path((tmp_path / "rings").read_text())
        files = sorted(ring_dir.glob(f"*{rings.SUFFIX}"))
        # The monitor has drained the first half's puts: the put ring's read position is there.
        puts = [f for f in files if _words(f)[rings.W_KIND] == Kind.PUT]
        assert len(puts) == 1, files
        _until(proc, lambda: all(_words(f)[rings.W_R] >= N for f in puts))
        rnd = random.Random(47)
        garbage = {}
        for f in files:
            with open(f, "r+b") as fh:
                data = rnd.randbytes(min(16384, f.stat().st_size))
                fh.write(data)
            garbage[f] = struct.unpack_from("<q", data, rings.W_R * 8)[0]
        # The monitor has read every overwritten ring since: it put its read position back.
        _until(proc, lambda: all(_words(f)[rings.W_R] != g for f, g in garbage.items()))
        (tmp_path / "go").write_text("")
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert f"took {2 * N} items, sum {sum(range(2 * N))}, in order: True" in stdout
    with ss.load(out) as run:
        assert run.sql("SELECT status FROM run")[1] == [("completed",)]
        damaged = [text for about, text in run.notes() if about == "damaged"]
        (tail,) = [p.id for p in run.topology.probes if p.kind == "tail"]
        _, [(recorded, dropped)] = run.sql(
            f"SELECT sum(recorded), sum(dropped) FROM drops WHERE probe_id = {tail}"
        )
    assert sorted(t.split()[1] for t in damaged) == sorted(f.name for f in files), damaged
    assert all("header overwritten" in t and "positions out of bounds" in t for t in damaged)
    # Every put after the monitor found the damage was read: the first half's, then the rest.
    assert (recorded, dropped) == (2 * N + 1, 0)
