"""A disk that is full at the start, or fills during the run, on a real (tmpfs) file system.

Each test mounts a small tmpfs of its own (root only: this project's test machines run the
suite as root; elsewhere these tests say why they cannot run) and unmounts it after. Whatever
happens, the run ends with one clear line and a non-zero exit, the application does not run on
blind, and the run file keeps what was written, its status saying why, with no file left beside
it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamscope.store.reader import load
from watched import APP, Watched, cli, start_steady, wait_for_frames


@pytest.fixture
def tmpfs() -> Iterator[Callable[[int], Path]]:
    """``tmpfs(mib)``: a fresh tmpfs of that size, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def _mount(mib: int) -> Path:
        where = Path(tempfile.mkdtemp(prefix="ss-tmpfs-"))
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield _mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)
        with contextlib.suppress(OSError):
            where.rmdir()


def fill(where: Path) -> Path:
    """Write zeros into ``where`` until the file system refuses (ENOSPC)."""
    filler = where / "filler"
    chunk = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
    with contextlib.suppress(OSError), open(filler, "ab", buffering=0) as f:
        while f.write(b"\0" * 4096):
            pass
    return filler


def test_a_full_disk_at_the_start_is_refused_before_the_application_starts(
    tmpfs: Callable[[int], Path], tmp_path: Path
) -> None:
    where = tmpfs(8)
    marker = tmp_path / "started"
    proc = subprocess.run(
        [*cli(), "run", str(APP), "--out", str(where / "r.duckdb"), "--", "--items", "10",
         "--marker", str(marker)],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("streamscope: error:") and "MiB free" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()
    assert list(where.iterdir()) == []


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_a_disk_that_fills_mid_run_stops_the_run_and_keeps_the_file(
    start: Callable[..., Watched], tmpfs: Callable[[int], Path], resource: str
) -> None:
    where = tmpfs(48)
    out = where / "r.duckdb"
    w = start_steady(start, out, resource)
    wait_for_frames(w, 4)
    filler = fill(where)
    _, stderr = w.proc.communicate(timeout=60)  # the app never ends by itself: it was stopped
    assert w.proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    said = [line for line in stderr.splitlines() if "full" in line]
    assert len(said) == 1 and len(stderr.strip().splitlines()) <= 2, stderr
    assert not w.alive_after(grace_s=2.0)
    # Finished with the reserve it kept: status, cause and frames, nothing beside it.
    assert sorted(p.name for p in where.iterdir()) == ["filler", "r.duckdb"]
    with load(out) as run:
        assert run.status == "failed"
        assert run.error is not None and "full" in run.error
        frames = run.results(0, "src -> work")
        assert len(frames) >= 1
        assert [f.frame for f in frames] == list(range(len(frames)))
        assert run.duration_ns == frames[-1].t_end_ns
    filler.unlink()
