"""The flagship demo: the paper's Monte Carlo Laplace solver on an emulated FPGA, at a small size.

Its findings come from the run files, as a user would read them: the PRNG's output queue fills
and stays full, results wait in the bus's buffer for the final flush, the walk stages limit the
rate together, and twice the walk stages raise the throughput (and ``compare`` says so first).
On the RTL device (``--rtl``) the device's side of ``avg -> print`` is reduced by the channel
monitor core, simulated and read over the register link: the same findings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from oracles import example
from streamscope.analysis import compare, findings

FRAME = "250ms"
#: The flagship's runs: blocks made, and blocks between two results of ``avg``.
BLOCKS, EVERY = 800, 120


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int | str, Path]:
    lap = example("laplace")
    out: dict[int | str, Path] = {}
    for walks, rtl in ((8, []), (16, []), (8, ["--rtl"])):
        key = "rtl" if rtl else walks
        path = tmp_path_factory.mktemp("laplace") / f"laplace{key}.duckdb"
        # 32 ms of device time per block: the walk units, not the interpreter, set the pace, even
        # beside busy cores (at 16 ms, sixteen units needed most of a core of the interpreter's:
        # beside two busy ones they made 604 items/s to eight's 455, and their frames' spread
        # hid the difference).
        args = ["--walks", str(walks), "--blocks", str(BLOCKS), "--every", str(EVERY),
                "--block-us", "32000"]  # fmt: skip
        p = lap.pipeline([*args, *rtl, "--quiet"])
        res = ss.run(p, lap.queries(FRAME), ss.RunOptions(out=path, mode="inline"))
        assert res.status == "completed", res.error
        out[key] = path
    return out


def _stat(run: ss.Run, text_start: str, stat: str) -> list[tuple[int, float, int]]:
    q = next(q for q in run.queries if q.text.startswith(text_start))
    return [
        (r.frame, float(p.value), r.covered_ns)
        for r in run.results(q.id)
        for p in r.points
        if getattr(p, "stat", "") == stat and p.value is not None  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("key", [8, "rtl"])
def test_prng_queue_fills_within_the_first_frames_and_stays_full(
    runs: dict[int | str, Path], key: int | str
) -> None:
    with ss.load(runs[key]) as run:
        cap = run.topology.channel("prng -> split").capacity
        maxes = _stat(run, "occupancy(prng -> split)", "max")
        means = _stat(run, "occupancy(prng -> split)", "mean")
    assert cap == 128
    full = [f for f, v, _ in maxes if v == cap]
    # Within a frame of the first item: the device starts (an RTL device its simulators first)
    # when the machine lets it, a second or more on a busy one.
    first = min(f for f, v, _ in maxes if v > 0)
    assert min(full) <= first + 1, (first, full)
    # Until the PRNG has made its last block: then the queue drains (and an RTL device's run
    # ends a second or two later, its clock's last calibration burst simulated).
    steady = [v for f, v, _ in means if min(full) < f < max(full)]
    assert len(steady) >= 3 and min(steady) > 0.9 * cap


@pytest.mark.parametrize("key", [8, "rtl"])
def test_results_wait_in_the_bus_buffer_until_the_final_flush(
    runs: dict[int | str, Path], key: int | str
) -> None:
    with ss.load(runs[key]) as run:
        (vq,) = run.virtual_queues()
    # A last frame may begin after the device finished (no data from it): left out.
    frames = [f for f in vq["frames_detail"] if f["tail_mean"] is not None]
    assert vq["target"] == "avg -> print"
    inserted = sum(f["items_in"] for f in frames)
    (flush,) = [k for k, f in enumerate(frames) if f["items_out"]]  # one transfer, at the end
    assert inserted == BLOCKS // EVERY and frames[flush]["items_out"] == inserted
    assert not any(f["items_in"] for f in frames[flush + 1 :])  # (an RTL device ends later)
    held = [f["tail_mean"] for f in frames[:flush]]
    assert held[-1] > held[0] and all(b >= a - 1e-9 for a, b in zip(held, held[1:], strict=False))


@pytest.mark.parametrize("key", [8, "rtl"])
def test_the_walk_stages_limit_the_rate_together(
    runs: dict[int | str, Path], key: int | str
) -> None:
    """The eight walk units are replicas of one stage: the finding names the group, not one."""
    with ss.load(runs[key]) as run:
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


def test_on_the_rtl_device_the_channel_core_reduced_the_buffer(runs: dict[int | str, Path]) -> None:
    """Every frame of the virtual queue's device side came from the core: the core's row says
    it read them all, ran cycles, and shows how little the register reads delayed a record (a
    few hundred cycles at most, after a frame's end)."""
    with ss.load(runs["rtl"]) as run:
        (vq,) = run.virtual_queues()
        cores = run.table("core")
    with ss.load(runs[8]) as run:
        assert len(run.table("core")["core"]) == 0  # the Python probes: no core
    assert list(zip(cores["resource"], cores["core"], strict=True)) == [
        ("fpga", "channel avg -> print")
    ]
    frames = [f for f in vq["frames_detail"] if f["tail_mean"] is not None]
    assert cores["frames"][0] >= len(frames) > 0
    assert cores["cycles"][0] > 0
    assert cores["most_shifted"][0] <= 1000


def test_sixteen_walks_raise_the_throughput_and_compare_says_so(
    runs: dict[int | str, Path],
) -> None:
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
