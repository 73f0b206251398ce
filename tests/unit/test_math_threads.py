"""``core.process.one_math_thread``: the monitor and the commands that read a run do their
linear algebra on one thread, while a watched program keeps the math threads it was given.
The truth is the BLAS library numpy loaded, asked in each process how many threads it runs
(its own ``get_num_threads``), beside its count where nothing was set (a thread per core)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamscope.core.process import MATH_THREADS

#: The lines every script ends with: numpy's BLAS library found among what the process mapped,
#: and its own count of its threads printed (-1: no OpenBLAS there).
ASK_BLAS = """
import ctypes, numpy
def blas_threads():
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.split()[-1]}
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "openblas_get_num_threads"):
            if hasattr(lib, name):
                return getattr(lib, name)()
    return -1
print("blas", blas_threads())
"""

#: The monitor's entry, refused its config (there is none) once it has loaded its modules.
MONITOR = (
    """
from streamscope.monitor.__main__ import main
assert main(["/nonexistent/config.json"]) == 2
"""
    + ASK_BLAS
)

#: A command that reads a run, as the ``streamscope`` command starts it.
COMMAND = (
    """
from streamscope.cli import main
try:
    main(["show", "--help"])
except SystemExit:
    pass
"""
    + ASK_BLAS
)


def _blas(code: str, env: dict[str, str]) -> int:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env=env, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split("blas")[-1])


@pytest.fixture
def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in MATH_THREADS}


def test_the_monitor_and_a_reading_command_run_one_math_thread(clean_env: dict[str, str]) -> None:
    plain = _blas(ASK_BLAS, clean_env)
    if plain < 0:
        pytest.skip("numpy here is not built on OpenBLAS")
    assert plain >= 1  # a thread per core (1 where there is one: then nothing tells them apart)
    assert _blas(MONITOR, clean_env) == 1
    assert _blas(COMMAND, clean_env) == 1


def test_a_watched_program_keeps_its_math_threads(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    program = tmp_path / "blas.py"
    program.write_text(
        ASK_BLAS + "import os\nprint('env', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    plain = _blas(ASK_BLAS, clean_env)
    if plain < 0:
        pytest.skip("numpy here is not built on OpenBLAS")
    cli = Path(sys.executable).with_name("streamscope")
    proc = subprocess.run([str(cli), "run", str(program), "-o", str(tmp_path / "r.duckdb"),
                           "--quiet"], capture_output=True, text=True, timeout=120,
                          check=False, env=clean_env, cwd=tmp_path, stdin=subprocess.DEVNULL)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert said["env"] == "None"  # nothing of streamscope's in its environment
    assert int(said["blas"]) == plain
