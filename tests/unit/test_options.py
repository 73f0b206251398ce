"""Run options are checked where they enter, and every one is honoured or refused."""

from __future__ import annotations

import time

import pytest

import streamscope as ss
from streamscope.core.errors import ConfigError
from streamscope.core.modes import ClockMethod, RunMode, RunStatus
from streamscope.core.options import PIPELINE_ONLY
from streamscope.runtime.options import RunOptions, RunResult


@pytest.mark.parametrize(
    ("field", "value", "valid"),
    [("mode", "thread", "process, inline"), ("clock_method", "ols", "hull, timetrial")],
)
def test_an_unknown_word_is_refused_with_the_valid_ones(field: str, value: str, valid: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown .*'{value}'; valid: {valid}"):
        RunOptions(**{field: value})  # type: ignore[arg-type]


def test_words_become_members_of_their_set() -> None:
    opts = RunOptions(mode="Inline ", clock_method="timetrial")  # type: ignore[arg-type]
    assert opts.mode is RunMode.INLINE and opts.clock_method is ClockMethod.TIMETRIAL
    assert opts.mode == "inline"  # and still read as their text
    result = RunResult("interrupted", "why", None)  # type: ignore[arg-type]
    assert result.status is RunStatus.INTERRUPTED and result.exit_code == 130
    assert RunResult(RunStatus.FAILED, "x", None).exit_code == 1
    with pytest.raises(ConfigError, match="unknown run status 'done'"):
        RunResult("done", None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("flush_interval_s", 0.5), ("calibrate_every_s", 0.5), ("ground_truth", True),
     ("device_trace", True)],
)  # fmt: skip
def test_a_program_refuses_what_only_a_pipeline_can_honour(field: str, value: object) -> None:
    assert field in PIPELINE_ONLY
    opts = RunOptions(mode=RunMode.INLINE, **{field: value})  # type: ignore[arg-type]
    with (
        pytest.raises(ConfigError, match=f"{field} cannot apply to a program"),
        ss.monitor([], opts),
    ):
        pass


def test_a_program_ends_at_its_time_limit_as_interrupted_saying_why() -> None:
    opts = RunOptions(mode=RunMode.INLINE, timeout_ns=300_000_000)
    t0 = time.monotonic()
    with ss.monitor([], opts) as session:
        while time.monotonic() - t0 < 60:  # ended by the limit long before
            time.sleep(0.01)
    assert session.result is not None
    assert session.result.status is RunStatus.INTERRUPTED
    assert session.result.error == "stopped after its time limit of 0.3 s"


def test_the_monitor_receives_the_options_whole() -> None:
    """One frozen value from the edge to the monitor process: through its config file's JSON,
    every field reads back equal (none is dropped or copied into another shape on the way)."""
    import json
    from pathlib import Path

    from streamscope.core.modes import ClockMethod, RunMode
    from streamscope.monitor.settings import MonitorSettings
    from streamscope.runtime.options import make_meta

    opts = RunOptions(
        frame_ns=250_000_000, out=Path("/tmp/x.duckdb"), overwrite=True, mode=RunMode.INLINE,
        flush_interval_s=0.02, tap_capacity=1 << 12, calibrate_every_s=0.5,
        clock_method=ClockMethod.TIMETRIAL, ground_truth=True, device_trace=True, trace=True,
        stall_ns=2_000_000_000, flight_records=7, timeout_ns=10**9, ray_address="127.0.0.1:1",
        app="a.py", argv=("--n", "3"), command="streamscope run a.py",
    )  # fmt: skip
    assert set(opts.to_dict()) == set(RunOptions.__dataclass_fields__)
    assert RunOptions.from_dict(json.loads(json.dumps(opts.to_dict()))) == opts
    settings = MonitorSettings(make_meta("p", opts), opts, "/tmp/truth")
    assert MonitorSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


@pytest.mark.parametrize("capacity", [0, 8, 100, 3 << 10])
def test_a_tap_capacity_not_a_power_of_two_of_at_least_16_is_refused(capacity: int) -> None:
    with pytest.raises(ConfigError, match=f"tap capacity {capacity} is not a power of two"):
        RunOptions(tap_capacity=capacity)
    assert RunOptions(tap_capacity=16).tap_capacity == 16
