"""Virtual time across a process with its own (emulated, unknown) clock, end to end.

The monitor only sees the device's raw ticks and its calibration bursts. Its per-frame latency
must match the exact truth within the uncertainty it reports (each removal's device tick through
the clock's true inverse: a truth no load on the machine can delay), and ``retime``
(interpolating between bursts) must not make it worse.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import streamscope as ss
from oracles import benchmark, example
from streamscope.monitor.retime import retime
from streamscope.report.summary import monitor_line

CLOCK = "rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5"
ITEMS = 1500
FRAME_NS = 100_000_000
CHANNEL = "src -> work"


def run_once(tmp: Path, clock: str | None) -> Path:
    """``examples/timezones.py`` as a validation run (``ground_truth``): its file keeps every
    record and the device clock as it really was, for the exact truth alone."""
    tmp.mkdir()
    res = ss.run(
        example("timezones").build(tmp, clock, ITEMS),
        ["latency(src -> work): p50, min, max every 100ms"],
        ss.RunOptions(
            frame_ns=FRAME_NS, out=tmp / "run.duckdb", mode="inline", calibrate_every_s=0.3,
            ground_truth=clock is not None,
        ),
    )  # fmt: skip
    assert res.status == "completed", res.error
    return tmp / "run.duckdb"


def inside(out: Path, label: str) -> None:
    """Every frame's median and extremes within its uncertainty of the exact truth (each
    removal's device tick through the clock's true inverse, each insertion the host's own
    tick: ``_clocktruth.judge``), none negative."""
    checked, missed, worst, negative = benchmark("_clocktruth").judge(out, CHANNEL, FRAME_NS)
    print(f"{label}: {checked} frames, {missed} outside by up to {worst / 1e3:.2f} us")
    assert checked >= 8, checked
    assert missed == 0, f"{label}: {missed} of {checked} frames outside, by up to {worst:.0f} ns"
    assert negative == 0, label


def bounds(out: Path) -> list[float]:
    """Each frame's uncertainty (ns)."""
    with ss.load(out) as run:
        return [
            float(fr.point("uncertainty_ns").value or 0.0)  # type: ignore[union-attr]
            for fr in run.results(0, CHANNEL)
        ]


@pytest.mark.slow
def test_latency_into_a_device_matches_the_truth_within_its_uncertainty(tmp_path: Path) -> None:
    """On a device clock the monitor is not told, every frame's median and extremes lie within
    the reported uncertainty of the exact truth, live and after ``retime`` (interpolating
    between bursts), whose bounds are no wider."""
    out = run_once(tmp_path / "dev", CLOCK)
    with ss.load(out) as run:
        assert len(run.table("clock_fit")["domain"]) >= 3, "start, periodic and end bursts"
    inside(out, "live")
    live = bounds(out)
    retime(out)
    inside(out, "retimed")
    assert max(bounds(out)) <= max(live)
    # The monitor's lag is said to be the wait for calibration only where there is one.
    with ss.load(run_once(tmp_path / "host", None)) as run:
        assert "calibration" not in monitor_line(run)


@pytest.mark.slow
@pytest.mark.parametrize("step_ns", [300_000, 3_000_000])
def test_a_clock_step_mid_run_stays_inside_the_bounds_live_and_after_retime(
    tmp_path: Path, step_ns: int
) -> None:
    """The device clock jumps mid-run. Frames after the step are placed in time only once a
    later burst brackets them, and their uncertainty reaches the exact truth whichever side
    of the step it lies on; no latency comes out negative."""
    out = run_once(tmp_path / "dev", f"{CLOCK},step_at_s=0.6,step_ns={step_ns}")
    inside(out, "live")
    assert max(bounds(out)) >= abs(step_ns) / 2, "no frame's bounds allow for the step"
    retime(out)
    inside(out, "retimed")
    # Frames away from the step keep bounds of their own, after retime too (not the run's widest,
    # which hold the step): two bursts between steps allow a change of rate between them too.
    retimed = bounds(out)
    assert min(retimed) < abs(step_ns) / 5
    assert min(retimed) < max(retimed) / 20
    # The monitor's lag is said to be the wait for calibration, not the monitor falling behind.
    with ss.load(out) as run:
        assert "wait for two calibration bursts" in monitor_line(run)


def test_cli_sets_the_calibration_cadence_and_method(tmp_path: Path) -> None:
    import subprocess
    import sys

    app = tmp_path / "app.py"
    app.write_text(
        "import time\nimport streamscope as ss\n"
        "def pipeline(argv):\n"
        "    p = ss.Pipeline('c')\n"
        "    p.add('src', range(400))\n"
        f"    p.add('work', lambda x: (time.sleep(0.001), x)[1], resource=ss.Process('dev', clock={CLOCK!r}))\n"
        "    p.add('sink', lambda x: None)\n"
        "    p.chain('src', 'work', 'sink', capacity=4)\n"
        "    return p\n"
    )
    out = tmp_path / "c.duckdb"
    cli = Path(sys.executable).with_name("streamscope")
    proc = subprocess.run(
        [str(cli), "run", str(app), "-q", "latency(src -> work): mean every 100ms", "-o", str(out),
         "--quiet", "--calibrate-every", "100ms", "--clock-method", "timetrial"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with ss.load(out) as run:
        fits = run.table("clock_fit")
    assert set(fits["method"].tolist()) == {"timetrial"}
    assert len(fits["method"]) >= 4  # start, several short bursts in ~0.4 s, end


def test_clock_steps_and_changes_of_rate_stay_inside_the_bounds_against_an_exact_truth() -> None:
    """``benchmarks/bench_clock_exact.py``'s trials, held to its targets: emulated clocks with
    random rates, drifts, ticks, steps and changes of rate, read at known host times and
    calibrated by simulated round trips, fed to the engine live and refitted; every frame's
    latency median and extremes within its uncertainty of the exact truth, none negative."""
    strict_clock_benchmark("bench_clock_exact.py", "--trials", "80", "--seed", "7")


@pytest.mark.slow
def test_clock_trials_through_real_processes_stay_inside_the_bounds() -> None:
    """``benchmarks/bench_clock_trials.py``, held to its targets on a few trials: a real device
    process on a random emulated clock (steps either way, changes of rate), real calibration
    round trips, the monitor live and ``retime`` after; every frame's median and extremes within
    their uncertainty of the exact truth (each removal tick through the clock's true inverse),
    none negative."""
    strict_clock_benchmark("bench_clock_trials.py", "--trials", "6", "--seed", "3")


def strict_clock_benchmark(script: str, *args: str) -> None:
    """Run a clock benchmark with ``--strict``: it exits 0 only with every target met, and
    prints the truth inside in 100 % of its frames, live and refitted."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / script
    proc = subprocess.run(
        [sys.executable, str(path), *args, "--strict"],
        capture_output=True, text=True, timeout=300, check=False, cwd=path.parents[1],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.count("truth inside 100.00 %") == 2


def test_the_live_output_shows_waiting_frames_provisional_and_stores_only_final_ones(
    tmp_path: Path,
) -> None:
    """Frames that wait for two later calibration bursts are printed ``(provisional)`` while
    they wait, and again, final, when the bursts come; the run file holds the final ones."""
    cli = Path(sys.executable).with_name("streamscope")
    app = Path(__file__).resolve().parents[2] / "examples" / "timezones.py"
    out = tmp_path / "p.duckdb"
    proc = subprocess.run(
        [str(cli), "run", str(app), "-q", "latency(src -> work): p50 every 100ms", "-o", str(out),
         "--calibrate-every", "1s", "--", "--truth", str(tmp_path / "truth"), "--items", "3000"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if " q0 src -> work: " in line]
    provisional = [line.split("]")[0] for line in lines if line.endswith("(provisional)")]
    final = [line.split("]")[0] for line in lines if not line.endswith("(provisional)")]
    assert provisional, proc.stdout[-2000:]
    assert set(provisional) <= set(final)  # every waiting frame came, final, later
    with ss.load(out) as run:
        assert len(run.results(0, "src -> work")) == len(final)
