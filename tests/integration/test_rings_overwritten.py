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
from streamscope.core.slabs import SLAB_RINGS, SLAB_SUFFIX
from watched import cli

APP = Path(__file__).parent / "apps" / "overwritten_rings.py"
N = 200  # the app's items per half


#: A ring of the run: its file, where it starts in it, its name in the journal, its bytes.
Ring = tuple[Path, int, str, int]


def _words(ring: Ring) -> tuple[int, ...]:
    with open(ring[0], "rb") as f:
        f.seek(ring[1])
        return struct.unpack("<24q", f.read(192))


def _rings(ring_dir: Path) -> list[Ring]:
    """The run's rings: files of their own, and the slots of slabs (a program's) in use."""
    found: list[Ring] = [
        (f, 0, f.name, f.stat().st_size) for f in ring_dir.glob(f"*{rings.SUFFIX}")
    ]
    for f in ring_dir.glob(f"*{SLAB_SUFFIX}"):
        size = f.stat().st_size // SLAB_RINGS
        slots = [(f, i * size, f"{f.name}@{i}", size) for i in range(SLAB_RINGS)]
        found += [r for r in slots if _words(r)[rings.W_MAGIC] & 0xFFFFFFFF == rings.MAGIC]
    return sorted(found)


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
        files = _rings(ring_dir)
        # The monitor has drained the first half's puts: the put ring's read position is there.
        puts = [f for f in files if _words(f)[rings.W_KIND] == Kind.PUT]
        assert len(puts) == 1, files
        _until(proc, lambda: all(_words(f)[rings.W_R] >= N for f in puts))
        rnd = random.Random(47)
        garbage = {}
        for f in files:
            with open(f[0], "r+b") as fh:
                fh.seek(f[1])
                data = rnd.randbytes(min(16384, f[3]))
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
    assert sorted(t.split()[1] for t in damaged) == sorted(f[2] for f in files), damaged
    assert all("header overwritten" in t and "positions out of bounds" in t for t in damaged)
    # Every put after the monitor found the damage was read: the first half's, then the rest.
    assert (recorded, dropped) == (2 * N + 1, 0)
