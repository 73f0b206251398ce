"""``core.process.keep_freed_memory``: the monitor's malloc keeps what it frees for the next
allocations. The truth is the kernel's count of the process's page faults: a virtual queue's
frame estimated over and over faults on fresh pages thousands of times a frame with glibc's
starting setting held, and hardly at all once the monitor's setting is made."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

SCRIPT = """
import resource, sys
sys.path.insert(0, {bench!r})
import bench_hosts as b
from streamscope.core.process import keep_freed_memory
if {keep}:
    assert keep_freed_memory()
else:  # glibc's starting setting, held: what it frees over 128 kB goes back (its own default
    # raises these thresholds as it goes, by an amount that varies from run to run)
    import ctypes
    mallopt = ctypes.CDLL("libc.so.6").mallopt
    assert mallopt(-3, 128 * 1024) and mallopt(-1, 128 * 1024)
b._estimate_once(10_000)  # the first frame finds its memory
faults = []
for _ in range(3):
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b._estimate_once(10_000)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
print(min(faults))
"""


def _faults(keep: bool) -> int:
    # a frame's summaries are made outside the measured part, the estimation inside: both
    # allocate; the fresh pages counted are the whole frame's (a fresh interpreter each).
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(bench=str(BENCH), keep=keep)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallopt")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="the C library is not glibc")
def test_an_estimated_frame_reuses_the_memory_the_last_one_freed() -> None:
    default, kept = _faults(False), _faults(True)
    print(
        f"page faults a frame: {default} with glibc's starting setting, {kept} with the monitor's"
    )
    assert default > 1000  # what the setting is for: thousands of fresh pages a frame
    assert kept < default / 10
