"""Calibration across a real process boundary against emulated clocks with known truth: the truth
lies inside the reported hard bounds in every randomised trial; the child process never outlives
its owner; ``streamscope calibrate`` end to end in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streamscope.core.clock import FakeClock
from streamscope.timebase.calibration import fit
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.timebase.roundtrip import (
    EmulatedCounter,
    assess,
    clock_socketpair,
    exchange,
    serve_clock,
)

TRIALS = 200
EXCHANGES = 300
METHODS = ("hull", "timetrial")


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# -- randomised trials across the process boundary ------------------------------------------------


def test_truth_inside_bounds_in_every_randomised_trial() -> None:
    rng = np.random.default_rng(20100713)
    margins: dict[str, list[float]] = {m: [] for m in METHODS}
    widths: dict[str, list[float]] = {m: [] for m in METHODS}
    errors: dict[str, list[float]] = {m: [] for m in METHODS}
    failures: list[str] = []
    rtt_min: list[float] = []
    rtt_median: list[float] = []
    start = time.perf_counter()
    with EmulatedCounter() as device:
        for trial in range(TRIALS):
            spec = EmulatedClockSpec.random(rng)
            # The device has been running for up to 1000 s; a step stays ≥ 1 s from the burst,
            # since one linear map cannot span a step (piecewise calibration is another test).
            age_s = float(rng.uniform(0.0, 1000.0))
            while spec.step_at_s is not None and abs(age_s - spec.step_at_s) < 1.0:
                age_s = float(rng.uniform(0.0, 20.0))
            truth = device.set_spec(spec, epoch_host_ns=time.monotonic_ns() - int(age_s * 1e9))
            ex = device.exchange(EXCHANGES)
            rtt = ex.t3_ns - ex.t1_ns
            rtt_min.append(float(rtt.min()))
            rtt_median.append(float(np.median(rtt)))
            for method in METHODS:
                cal = assess(ex, fit(ex, method), truth)
                margins[method].append(cal.truth.margin_ns)
                widths[method].append(cal.bound_width_ns)
                errors[method].append(abs(cal.truth.offset_error_ns))
                if not cal.truth.inside:
                    failures.append(f"trial {trial} {method} {spec}: margin {cal.truth.margin_ns}")
    elapsed = time.perf_counter() - start
    print(f"\n{TRIALS} trials x {EXCHANGES} round trips in {elapsed:.1f} s")
    print(
        f"rtt min median {_pct(rtt_min, 50):.0f} ns, rtt median median {_pct(rtt_median, 50):.0f} ns,"
        f" rtt min worst {max(rtt_min):.0f} ns"
    )
    for m in METHODS:
        print(
            f"{m:>9}: worst margin {min(margins[m]):.2f} ns; bound width median "
            f"{_pct(widths[m], 50):.0f} ns p95 {_pct(widths[m], 95):.0f} ns; |offset error| median "
            f"{_pct(errors[m], 50):.1f} ns p95 {_pct(errors[m], 95):.1f} ns max {max(errors[m]):.1f} ns"
        )
    assert not failures, "\n".join(failures)
    for m in METHODS:
        assert len(margins[m]) == TRIALS
    # The hull's map lies inside the bounds, as the truth does: its offset error can never
    # exceed the bound width. The paper's least-squares fit is not held inside the bounds (a
    # loaded machine's skewed round trips can pull it out), so it may, now and then.
    assert max(e - w for e, w in zip(errors["hull"], widths["hull"], strict=True)) <= 1e-3
    outside = sum(
        e > w + 1e-3 for e, w in zip(errors["timetrial"], widths["timetrial"], strict=True)
    )
    print(f"timetrial: offset error beyond the bound width in {outside} of {TRIALS} trials")
    assert outside <= TRIALS // 20


def test_a_wrong_truth_is_caught() -> None:
    """The check has teeth: the same exchanges judged against a clock shifted by twice the bound
    width (or a rate 1000 ppm off) fall outside the bounds."""
    spec = EmulatedClockSpec.parse("rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5")
    with EmulatedCounter(spec) as device:
        ex = device.exchange(EXCHANGES)
        truth = device.clock
    f = fit(ex, "hull")
    good = assess(ex, f, truth)
    assert good.truth.inside
    shift = int(2 * good.bound_width_ns) + 1
    assert not assess(ex, f, EmulatedClock(spec, truth.epoch_host_ns + shift)).truth.inside
    assert not assess(ex, f, EmulatedClock(spec, truth.epoch_host_ns - shift)).truth.inside


def test_set_spec_switches_the_clock_in_the_child() -> None:
    with EmulatedCounter(EmulatedClockSpec(tick_ns=1.0)) as device:
        first = device.exchange(20)
        device.set_spec(EmulatedClockSpec(offset_s=-500.0, tick_ns=1000.0))
        second = device.exchange(20)
    # 1 ns ticks since now vs 1 µs ticks from −500 s: readings near 0..1e4 vs near −5e8.
    assert first.t2_ticks.min() >= 0
    assert -500_000_001 <= second.t2_ticks.min() <= second.t2_ticks.max() < -499_000_000


# -- the child process's life ---------------------------------------------------------------------


def test_no_child_survives_the_block_even_on_error() -> None:
    pid = None
    with pytest.raises(ZeroDivisionError), EmulatedCounter() as device:
        pid = device.pid
        assert pid is not None and _alive(pid)
        _ = 1 / 0
    assert pid is not None
    assert not _alive(pid)
    with pytest.raises(RuntimeError, match="not running"):
        device.exchange(1)


def test_a_silent_device_times_out_and_is_closed() -> None:
    device = EmulatedCounter(timeout_s=0.2).start()
    pid = device.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(TimeoutError, match=r"did not answer within 0\.2 s"):
        device.exchange(10)  # a hang would be ended by the suite's per-test timeout
    assert not _alive(pid)
    with pytest.raises(RuntimeError, match="not running"):
        device.exchange(1)


def test_child_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                from streamscope.timebase.roundtrip import EmulatedCounter
                d = EmulatedCounter().start()
                d.exchange(5)
                print(d.pid, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(child)


def test_serve_clock_answers_from_a_thread() -> None:
    host_end, device_end = clock_socketpair()
    clock = FakeClock(123_456, domain="fpga", tick_period_ns=4.0)
    server = threading.Thread(target=serve_clock, args=(device_end, clock), daemon=True)
    server.start()
    ex = exchange(host_end, 50)
    assert ex.t2_ticks.tolist() == [123_456] * 50
    assert np.all(ex.t1_ns <= ex.t3_ns)
    assert np.all(ex.t1_ns[1:] >= ex.t3_ns[:-1])
    # A spec switch is refused for a clock that is not emulated; the responder keeps serving.
    host_end.send(b"s" + (0).to_bytes(8, "little") + b"tick_ns=2")
    assert int.from_bytes(host_end.recv(8), "little", signed=True) == -(2**63)
    clock.advance(1)
    assert exchange(host_end, 1).t2_ticks.tolist() == [123_457]
    host_end.send(b"q")
    server.join(timeout=5)
    assert not server.is_alive()
    host_end.close()
    device_end.close()


def test_exchange_reports_a_vanished_device() -> None:
    host_end, device_end = clock_socketpair()
    device_end.close()
    with pytest.raises((ConnectionError, BrokenPipeError)):
        exchange(host_end, 3)
    host_end.close()
    with pytest.raises(ValueError, match="n >= 1"):
        exchange(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET), 0)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b, pytest.raises(ValueError, match="SOCK_SEQPACKET"):
        serve_clock(b, FakeClock())


# -- the command ----------------------------------------------------------------------------------

SPEC = "rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5"
KEYS = {
    "method", "n", "n_used", "feasible", "x0_ticks", "s_ns_per_tick", "b_ns", "rtt_min_ns",
    "rtt_median_ns", "residual_rms_ns", "bound_width_ns", "spec", "x_centre", "true_s_ns_per_tick",
    "true_b_ns", "offset_error_ns", "truth_margin_ns", "truth_inside_bounds", "n_checked",
}  # fmt: skip


def cli() -> list[str]:
    script = Path(sys.executable).with_name("streamscope")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamscope"]


def streamscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.parametrize("method", METHODS)
def test_cli_json_reports_the_fit_and_the_truth(method: str) -> None:
    r = streamscope("calibrate", "--emulate", SPEC, "--method", method, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    print(f"\ncalibrate --method {method}: " + json.dumps({k: out[k] for k in sorted(KEYS)}))
    assert set(out) >= KEYS
    assert out["method"] == method
    assert out["n"] == 1000
    assert out["spec"] == SPEC.replace("37", "37.0").replace("=1,", "=1.0,")
    assert out["truth_inside_bounds"] is True
    assert out["truth_margin_ns"] >= 0
    assert abs(out["offset_error_ns"]) <= out["bound_width_ns"]
    assert out["bound_width_ns"] > 0
    assert out["rtt_min_ns"] > 0
    assert out["true_s_ns_per_tick"] == pytest.approx(7.5 / (1 + 37e-6), rel=1e-6)


def test_cli_prints_a_readable_summary() -> None:
    r = streamscope("calibrate", "--emulate", "tick_ns=2000,rate_ppm=-90", "--exchanges", "200")
    assert r.returncode == 0, r.stderr
    for label in ("method", "bound width", "residual rms", "rtt min", "offset error"):
        assert label in r.stdout
    assert "truth inside bounds  yes" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--emulate", "rate_ppm=3,tick=2"], "unknown key 'tick'"),
        (["--emulate", "tick_ns=0"], "tick_ns must be > 0"),
        (["--emulate", "offset_s=soon"], "offset_s='soon' is not a number"),
        (["--emulate", SPEC, "--method", "median"], "valid: hull, timetrial"),
        (["--emulate", SPEC, "--exchanges", "1"], "--exchanges must be at least 2"),
    ],
)
def test_cli_refuses_bad_input_without_a_traceback(args: list[str], message: str) -> None:
    r = streamscope("calibrate", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert message in r.stderr
    assert r.stderr.startswith("streamscope: error:")


def test_cli_help_documents_the_json_keys() -> None:
    r = streamscope("calibrate", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for key in ("offset_error_ns", "bound_width_ns", "truth_inside_bounds", "s_ns_per_tick"):
        assert key in text
