"""``trace``: every probe record is kept in the run file (for timelines), not only frames."""

from __future__ import annotations

from pathlib import Path

import streamscope as ss


def _pipeline() -> ss.Pipeline:
    p = ss.Pipeline("traced")
    p.add("src", range(2000))
    p.add("work", lambda x: x + 1)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=8)
    return p


def test_trace_keeps_every_record_and_plain_runs_only_their_flight_recorders(
    tmp_path: Path,
) -> None:
    queries = ["occupancy(src -> work): mean every 100ms", "state(work): duty every 100ms"]
    counts = {}
    for trace, flight in ((False, 0), (False, 1000), (True, 1000)):
        out = tmp_path / f"t{trace}{flight}.duckdb"
        opts = ss.RunOptions(out=out, trace=trace, flight_records=flight, mode="inline")
        res = ss.run(_pipeline(), queries, opts)
        assert res.status == "completed", res.error
        with ss.load(out) as run:
            _, rows = run.sql("SELECT count(*) FROM record")
            recorded = sum(d.recorded for d in run.drops())
            counts[(trace, flight)] = (rows[0][0], recorded)
    assert counts[(False, 0)][0] == 0
    flown, recorded = counts[(False, 1000)]
    assert flown == 1000 < recorded  # the latest 1000 of them
    kept, recorded = counts[(True, 1000)]
    assert kept == recorded and kept >= 4000  # 2000 insertions + 2000 removals, and states
