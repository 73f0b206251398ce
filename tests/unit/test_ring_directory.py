"""Run directories: a fresh one per run; those of runs killed whole are swept by the next."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from streamscope.core.rings import STALE_AFTER_S, ring_directory


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_killed_runs_directory_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    mine = Path(ring_directory(str(tmp_path)))
    root = mine.parent
    old = time.time() - STALE_AFTER_S - 5
    dead = root / f"streamscope-{_dead_pid()}-deadbeef"
    fresh_dead = root / f"streamscope-{_dead_pid()}-0badf00d"
    alive = root / f"streamscope-{os.getpid()}-cafecafe"
    for d in (dead, fresh_dead, alive):
        d.mkdir()
        (d / "ring").write_bytes(b"x")
    for d in (dead, alive):
        os.utime(d, (old, old))
    try:
        another = Path(ring_directory(str(tmp_path)))
        assert not dead.exists()  # its application is gone, and it is old: swept
        assert fresh_dead.exists()  # too recent: its monitor may still be finishing
        assert alive.exists() and mine.exists() and another.exists()
    finally:
        for d in (dead, fresh_dead, alive, mine, root / another.name):
            shutil.rmtree(d, ignore_errors=True)
