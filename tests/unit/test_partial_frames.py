"""The run's partial frames (it began or ended inside them) are marked in plots and tables."""

from __future__ import annotations

from streamscope.report.data import QuerySeries, TargetSeries
from streamscope.report.figures import timeseries

S = 1_000_000_000


def test_a_partial_last_frame_is_hollow_and_says_so() -> None:
    ts = TargetSeries(
        "a -> b", frames=[0, 1, 2], t_start_ns=[0, S, 2 * S], t_end_ns=[S, 2 * S, 3 * S],
        covered_ns=[S, S, 300_000_000], stats={"mean": [1.0, 2.0, 3.0]},
    )  # fmt: skip
    fig = timeseries(
        QuerySeries(0, "occupancy(a -> b): mean", "occupancy", "items", S, ("mean",), [ts])
    )
    assert fig is not None
    (trace,) = fig["data"]
    assert trace["marker"]["symbol"] == ["circle", "circle", "circle-open"]
    notes = [c[1] for c in trace["customdata"]]
    assert notes[:2] == ["", ""]
    assert notes[2] == " (partial: 300ms of 1s)"
    assert "%{customdata[1]}" in trace["hovertemplate"]
