"""The DeVille, Troxel & George 2005 Game of Life experiment at a small size, through the real CLI in subprocesses.

The model in ``examples/life.py`` says, without any monitor, exactly which probe samples at which
hardware cycle; every sample must come back as recorded or as dropped. Central storage's drops
are checked per probe against a cycle-by-cycle arbiter written here, and must not fall as
probes are added; distributed storage drops nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oracles import EXAMPLES, example

GENERATIONS = 60
SIZE = ["--width", "64", "--height", "40", "--seed", "3"]
CASES = [("centralized", 2), ("centralized", 4), ("centralized", 8), ("distributed", 8)]
#: The same on the RTL device: the storage core, simulated, decides every write and drop (the
#: distributed core on the RTL device: ``tests/property/test_hw_rtl.py``). Its run is shorter,
#: beside the Python probes' run of as many generations (``short-``): the core simulated a
#: cycle at a time is most of what this file costs (14 s of CPU for 60 generations), and the
#: universe is period two, so each generation's samples and drops are those of its like.
RTL_CASES = [("rtl-centralized", 8), ("short-centralized", 8)]
RTL_GENERATIONS = 20


def scheme(storage: str) -> str:
    """The storage scheme of a case (``rtl-``: on the RTL device; ``short-``: its twin)."""
    return storage.removeprefix("rtl-").removeprefix("short-")


def generations(storage: str) -> int:
    return GENERATIONS if scheme(storage) == storage else RTL_GENERATIONS


PORTS = 2


def cli() -> list[str]:
    script = Path(sys.executable).with_name("streamscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamscope"]


def streamscope(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli(), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """show --json's probes of each run, in region order."""
    out = {}
    folder = tmp_path_factory.mktemp("life")
    # The runs at once: the model's cycles are explicit, so the drops do not depend on timing.
    running = {}
    for storage, n in CASES + RTL_CASES:
        path = folder / f"life-{storage}-{n}.duckdb"
        argv = [*SIZE, "--generations", str(generations(storage)), "--probes", str(n),
                "--storage", scheme(storage), "--ports", str(PORTS)]  # fmt: skip
        argv += ["--rtl"] if storage.startswith("rtl-") else []
        running[(storage, n)] = path, subprocess.Popen(
            [*cli(), "run", str(EXAMPLES / "life.py"), "--out", str(path), "--", *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    for (storage, n), (path, proc) in running.items():
        _, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-2000:]
        assert f"life: {generations(storage)} generations" in stderr
        shown = streamscope("show", path, "--json")
        assert shown.returncode == 0, shown.stderr[-2000:]
        doc = json.loads(shown.stdout)
        assert doc["run"]["status"] == "completed"
        found = [p for p in doc["probes"] if p["kind"] == "sampler"]
        out[(storage, n)] = sorted(
            found, key=lambda p: int(p["target"].removeprefix("life.region"))
        )
    return out


def model_events(n: int, count: int = GENERATIONS) -> list[tuple[int, list[int]]]:
    life = example("life")
    return list(life.offers(64, 40, 13, 3, count, n))


def offered(n: int, count: int = GENERATIONS) -> list[int]:
    counts = [0] * n
    for _, ks in model_events(n, count):
        for k in ks:
            counts[k] += 1
    return counts


def reference_drops(n: int, ports: int = PORTS, count: int = GENERATIONS) -> list[int]:
    """Hold registers of one sample, ``ports`` grants per cycle, round robin in region order;
    every cycle simulated: grants first, then that cycle's samples."""
    by_cycle = dict(model_events(n, count))
    held = [False] * n
    dropped = [0] * n
    last = n - 1
    for cycle in range(min(by_cycle), max(by_cycle) + 1):
        order = [(last + 1 + j) % n for j in range(n)]
        for k in [k for k in order if held[k]][:ports]:
            held[k] = False
            last = k
        for k in by_cycle.get(cycle, []):
            if held[k]:
                dropped[k] += 1
            else:
                held[k] = True
    return dropped


def fraction(found: list[dict[str, Any]]) -> float:
    dropped = sum(p["dropped"] for p in found)
    return dropped / (dropped + sum(p["recorded"] for p in found))


def test_model_universe_is_period_two_and_bands_cover_the_width() -> None:
    life = example("life")
    u = life.seed_universe(64, 40, 13, 3)
    assert u.sum() == 13 * 12
    assert (life.step(life.step(u)) == u).all()
    assert not (life.step(u) == u).all()
    for n in (1, 2, 3, 4, 8, 16):
        cols = life.bands(64, n)
        assert cols[0][0] == 0 and cols[-1][1] == 64
        assert all(a[1] == b[0] for a, b in zip(cols, cols[1:], strict=False))
    fired, values = life.band_events(np.zeros((1, 64), bool), np.ones((1, 64), bool), [(0, 64)])
    assert fired.tolist() == [[True]] and values.tolist() == [[-1]]  # 64 bits, signed register


@pytest.mark.parametrize("case", CASES + RTL_CASES, ids=[f"{s}-{n}" for s, n in CASES + RTL_CASES])
def test_every_sample_is_recorded_or_counted_dropped(
    probes: dict[tuple[str, int], list[dict[str, Any]]], case: tuple[str, int]
) -> None:
    storage, n = case
    found = probes[case]
    assert [p["target"] for p in found] == [f"life.region{k}" for k in range(n)]
    assert {p["storage"] for p in found} == {scheme(storage)}
    assert [p["recorded"] + p["dropped"] for p in found] == offered(n, generations(storage))


def test_distributed_storage_drops_nothing(
    probes: dict[tuple[str, int], list[dict[str, Any]]],
) -> None:
    assert [p["dropped"] for p in probes[("distributed", 8)]] == [0] * 8


@pytest.mark.parametrize("n", [2, 4, 8])
def test_central_drops_match_a_cycle_by_cycle_arbiter(
    probes: dict[tuple[str, int], list[dict[str, Any]]], n: int
) -> None:
    assert [p["dropped"] for p in probes[("centralized", n)]] == reference_drops(n)


def test_the_rtl_arbiter_drops_what_the_cycle_by_cycle_arbiter_drops(
    probes: dict[tuple[str, int], list[dict[str, Any]]],
) -> None:
    """On the RTL device every drop is the storage core's own count, read over the register
    link: exactly the reference arbiter's, and the Python probes' run records the same."""
    rtl = probes[("rtl-centralized", 8)]
    assert [p["dropped"] for p in rtl] == reference_drops(8, count=RTL_GENERATIONS)
    assert sum(p["dropped"] for p in rtl) > 0
    same = [(p["recorded"], p["dropped"]) for p in probes[("short-centralized", 8)]]
    assert [(p["recorded"], p["dropped"]) for p in rtl] == same


def test_central_drop_fraction_grows_with_the_probes(
    probes: dict[tuple[str, int], list[dict[str, Any]]],
) -> None:
    f2, f4, f8 = (fraction(probes[("centralized", n)]) for n in (2, 4, 8))
    # Two probes, two write ports: nothing waits (the paper's 0 %).
    assert f2 == 0.0
    assert f2 <= f4 <= f8
    assert f8 > 0.0
