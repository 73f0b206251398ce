"""The flagship demo: the seed's Monte Carlo Laplace solver on an emulated FPGA, at a small size.

Its findings come from the run files, as a user would read them: the PRNG's output queue fills
and stays full, results wait in the bus's buffer for the final flush, the walk stages limit the
rate together, and twice the walk stages raise the throughput (and ``compare`` says so first).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from oracles import example
from streamscope.analysis import compare, findings

FRAME = "250ms"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    lap = example("laplace")
    out = {}
    for walks in (8, 16):
        path = tmp_path_factory.mktemp("laplace") / f"laplace{walks}.duckdb"
        # 16 ms of device time per block: the walk units, not the interpreter, set the pace.
        args = ["--walks", str(walks), "--blocks", "1600", "--every", "120", "--block-us", "16000"]
        p = lap.pipeline([*args, "--quiet"])
        res = ss.run(p, lap.queries(FRAME), ss.RunOptions(out=path, mode="inline"))
        assert res.status == "completed", res.error
        out[walks] = path
    return out


def _stat(run: ss.Run, text_start: str, stat: str) -> list[tuple[int, float, int]]:
    q = next(q for q in run.queries if q.text.startswith(text_start))
    return [
        (r.frame, float(p.value), r.covered_ns)
        for r in run.results(q.id)
        for p in r.points
        if getattr(p, "stat", "") == stat and p.value is not None  # type: ignore[attr-defined]
    ]


def test_prng_queue_fills_within_the_first_frames_and_stays_full(runs: dict[int, Path]) -> None:
    with ss.load(runs[8]) as run:
        cap = run.topology.channel("prng -> split").capacity
        maxes = _stat(run, "occupancy(prng -> split)", "max")
        means = _stat(run, "occupancy(prng -> split)", "mean")
    assert cap == 128
    first_full = min(f for f, v, _ in maxes if v == cap)
    assert first_full <= 1
    # Until the PRNG has made its last block: then the queue drains (the last two frames).
    steady = [v for f, v, covered in means if f > first_full and covered >= 2.4e8][:-2]
    assert len(steady) >= 3 and min(steady) > 0.9 * cap


def test_results_wait_in_the_bus_buffer_until_the_final_flush(runs: dict[int, Path]) -> None:
    with ss.load(runs[8]) as run:
        (vq,) = run.virtual_queues()
    # A last frame may begin after the device finished (no data from it): left out.
    frames = [f for f in vq["frames_detail"] if f["tail_mean"] is not None]
    assert vq["target"] == "avg -> print"
    out = [f["items_out"] for f in frames]
    inserted = sum(f["items_in"] for f in frames)
    assert inserted == 13 and out[-1] == inserted and sum(out[:-1]) == 0
    held = [f["tail_mean"] for f in frames[:-1]]
    assert held[-1] > held[0] and all(b >= a - 1e-9 for a, b in zip(held, held[1:], strict=False))


def test_the_walk_stages_limit_the_rate_together(runs: dict[int, Path]) -> None:
    """The eight walk units are replicas of one stage: the finding names the group, not one."""
    with ss.load(runs[8]) as run:
        found = findings(run)
    (top,) = [f for f in found if f.kind == "bottleneck"]
    walks = [f"walk{i}" for i in range(8)]
    assert top.target == "walk0\u2013walk7", top.title
    assert top.title.startswith("walk0\u2013walk7 are rate-limiting together (busy ")
    assert top.suggestion.startswith("add replicas")
    assert top.evidence["members"] == walks
    assert set(top.evidence["busy_by_member"]) == set(walks)
    assert top.evidence["busy"] >= 0.8 and top.evidence["busy_frames"]
    assert not any(f.target in walks for f in found), [f.title for f in found]


def test_sixteen_walks_raise_the_throughput_and_compare_says_so(runs: dict[int, Path]) -> None:
    with ss.load(runs[8]) as a, ss.load(runs[16]) as b:
        c = compare(a, b)
        rate_a = np.mean([v for _, v, _ in _stat(a, "throughput(prng -> split)", "mean")[1:-1]])
        rate_b = np.mean([v for _, v, _ in _stat(b, "throughput(prng -> split)", "mean")[1:-1]])
    row = c.row("query", "mean", name=f"throughput(prng -> split): mean every {FRAME}")
    assert rate_b > rate_a
    assert row is not None and row.verdict == "better", c.summary
    assert c.speed is not None and c.speed.verdict == "faster", c.headline
    assert c.headline.startswith("Run B (laplace-16) is faster than run A (laplace-8): throughput")


def test_the_solution_is_right_within_its_monte_carlo_error(tmp_path: Path) -> None:
    """Boundary u = x / (n-1): the harmonic solution inside is the same plane (and so is the
    grid's discrete one, which the random walks estimate without bias)."""
    lap = example("laplace")
    save = tmp_path / "u.npy"
    p = lap.pipeline(["--boundary", "linear", "--grid", "10", "--blocks", "600", "--walks", "4",
                      "--block-us", "0", "--every", "50", "--save", str(save), "--quiet"])  # fmt: skip
    res = ss.run(p, ["throughput(prng -> split): mean every 1s"], ss.RunOptions(mode="inline"))
    assert res.status == "completed", res.error
    x, _, est, walks = np.load(save)
    truth = x / 9.0
    sigma = 0.5 / np.sqrt(walks)  # values lie in [0, 1]: variance at most 1/4
    assert walks.min() > 1000
    assert np.all(np.abs(est - truth) < 4.5 * sigma), (est, truth, sigma)


@pytest.mark.parametrize("walks", [1, 4, 16])
def test_the_flagship_queries_follow_its_walks(walks: int) -> None:
    """``make run`` with any ``--walks``: the app's QUERIES measure every walk stage it built."""
    from streamscope.runtime.session import prepare

    lap = example("laplace")
    plan, _ = prepare(lap.pipeline(["--walks", str(walks), "--quiet"]), lap.QUERIES, 10**9)
    measured = {t.name for q in plan.queries if q.metric == "state" for t in q.targets}
    assert measured == {"prng", "split", "avg", *(f"walk{i}" for i in range(walks))}
