"""``streamscope calibrate --emulate SPEC``: round trips to an emulated device in a child process,
a fit of its clock onto the host's, and how far the fit is from the truth it was not told."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from streamscope.timebase.emulated import EmulatedClockSpec
    from streamscope.timebase.roundtrip import EmulatedCalibration

METHODS = ("hull", "timetrial")


def calibrate(
    emulate: Annotated[
        str,
        typer.Option(
            metavar="SPEC",
            help="Emulated device clock, e.g. rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5 "
            "(keys: rate_ppm, offset_s, drift_ppb_s, tick_ns, step_at_s, step_ns).",
        ),
    ],
    method: Annotated[
        str, typer.Option(help="hull (hard bounds from the convex hull) or timetrial (LMS fit).")
    ] = "hull",
    exchanges: Annotated[int, typer.Option(help="Round trips to make (at least 2).")] = 1000,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> int:
    """Calibrate an emulated device clock across a process boundary and check the fit.

    The fit maps a device tick position x to host ns: t = s_ns_per_tick * (x - x0_ticks) + b_ns.
    With --json the object has these keys:
    method, n, n_used, feasible, x0_ticks, s_ns_per_tick, b_ns, rtt_min_ns, rtt_median_ns,
    residual_rms_ns, bound_width_ns (hard-bound width at the burst centre), spec,
    x_centre (the burst centre, ticks), true_s_ns_per_tick and true_b_ns (the true slope, and host
    ns at x_centre), offset_error_ns (estimate - truth at x_centre), truth_margin_ns (smallest
    distance from the truth to a bound; negative means outside), truth_inside_bounds (checked at
    1001 positions across the burst), n_checked.

    Exit status: 0 done (whether or not the truth was inside), 2 invalid input.
    """
    from streamscope.report.console import SafeConsole
    from streamscope.timebase.emulated import EmulatedClockSpec
    from streamscope.timebase.roundtrip import calibrate_emulated

    spec = EmulatedClockSpec.parse(emulate)
    _check(method, exchanges)
    result = calibrate_emulated(spec, n=exchanges, method=method)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return 0
    out = SafeConsole()
    for name, value in _lines(spec, result):
        out.print(f"{name:<20} {value}", markup=False)
    return 0


def _check(method: str, exchanges: int) -> None:
    from streamscope.core.errors import ConfigError

    if method not in METHODS:
        raise ConfigError(f"unknown --method {method!r}; valid: {', '.join(METHODS)}")
    if exchanges < 2:
        raise ConfigError(f"--exchanges must be at least 2, got {exchanges}")


def _lines(spec: EmulatedClockSpec, result: EmulatedCalibration) -> list[tuple[str, str]]:
    """The fit, and how far it is from the truth, as (name, value) lines."""
    from streamscope.core.fmt import fmt_ns

    f, truth = result.fit, result.truth
    return [
        ("emulated clock", str(spec)),
        ("method", f"{f.method} ({f.n_used} of {f.n} round trips used, feasible={f.feasible})"),
        ("s", f"{f.s_ns_per_tick:.9f} ns/tick (true {truth.true_s_ns_per_tick:.9f})"),
        ("b", f"{f.b_ns:.1f} host ns at tick {f.x0_ticks}"),
        ("bound width", fmt_ns(result.bound_width_ns)),
        ("residual rms", fmt_ns(f.residual_rms_ns)),
        ("rtt min / median", f"{fmt_ns(f.rtt_min_ns)} / {fmt_ns(result.rtt_median_ns)}"),
        ("offset error", f"{fmt_ns(truth.offset_error_ns)} (estimate - truth at burst centre)"),
        ("truth inside bounds", "yes" if truth.inside else "NO"),
        ("truth margin", fmt_ns(truth.margin_ns)),
    ]
