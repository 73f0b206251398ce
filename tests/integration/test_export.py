"""``streamscope export``: real runs to Perfetto, OTF2 and Chrome JSON, each read back.

The files are checked against the run itself: slices per stage against its state records,
timestamps against the records' virtual ns, counter tracks against the channels' queries, and a
function-traced run's call slices against the calls its stage made.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import streamscope as ss
from streamscope.core.records import STATE_LABELS, Kind
from streamscope.export import ExportSummary, export_run, write_timeline
from streamscope.export.timeline import Timeline, build_timeline, clock_domains

otf2 = pytest.importorskip("otf2")
pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

QUERIES = ["state(work): duty every 100ms", "occupancy(src -> work): mean every 100ms"]


def _work(x: int) -> int:
    time.sleep(0.0005)
    return x


def _paced(n: int) -> Iterator[int]:
    """``n`` items 0.5 ms apart: the link's virtual queue then models a frame of a few hundred
    items (a source with no pause makes its gaps µs, and each simulated frame tens of
    thousands of items: seconds of the monitor's time that this test does not need)."""
    for i in range(n):
        time.sleep(0.0005)
        yield i


def _pipeline(device: bool = False) -> ss.Pipeline:
    p = ss.Pipeline("x")
    p.add("src", range(500) if not device else _paced(300))
    if device:  # a second clock domain; link capacity >= bulk size
        p.add("work", _work, resource=ss.EmulatedDevice("accel", bulk_size=8, transfer_us=50))
    else:
        p.add("work", lambda x: (time.sleep(0.0005), x)[1])
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=32 if device else 4)
    return p


#: Items through the function-traced stage: each makes 1 ``_traced_work`` call, 2 ``_outer``
#: and 6 ``_inner`` (nested in that order).
TRACED_ITEMS = 300
EXPECTED_CALLS = {
    "_traced_work": TRACED_ITEMS,
    "_outer": 2 * TRACED_ITEMS,
    "_inner": 6 * TRACED_ITEMS,
}


def _inner(x: int) -> int:
    return sum(range(x % 7 + 20))


def _outer(x: int) -> int:
    return _inner(x) + _inner(x + 1) + _inner(x + 2)


def _traced_work(x: int) -> int:
    return _outer(x) + _outer(x + 1)


def _run_function_traced(path: Path) -> Path:
    p = ss.Pipeline("calls")
    p.add("src", range(TRACED_ITEMS))
    p.add("work", _traced_work)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=4)
    p.trace(stages=["work"])
    opts = ss.RunOptions(out=path, mode="inline", trace=True)
    res = ss.run(p, ["state(work): duty every 100ms"], opts)
    assert res.status == "completed", res.error
    return path


def _run(path: Path, *, trace: bool, device: bool = False, flight: int = 200_000) -> Path:
    opts = ss.RunOptions(out=path, mode="inline", trace=trace, flight_records=flight)
    res = ss.run(_pipeline(device), QUERIES, opts)
    assert res.status == "completed", res.error
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("export")
    return {
        "traced": _run(d / "traced.duckdb", trace=True),
        "plain": _run(d / "plain.duckdb", trace=False, flight=0),  # no raw records at all
        "device": _run(d / "device.duckdb", trace=True, device=True),
        "calls": _run_function_traced(d / "calls.duckdb"),
    }


def _state_records(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per stage with a state probe: the records' virtual ns (sorted) and states, computed here
    from the record table, the calibration and t0."""
    with ss.load(path) as run:
        domains = clock_domains(run)
        rec = run.table("record")
        out = {}
        for p in run.topology.probes:
            if p.kind != "state":
                continue
            m = (rec["probe_id"] == p.id) & (rec["kind"] == int(Kind.STATE))
            ns, _ = domains.to_ns_each(p.domain, rec["ticks"][m].astype(np.int64))
            o = np.argsort(ns, kind="stable")
            out[p.target] = (np.maximum(ns[o], 0), rec["value"][m][o])
        return out


def test_otf2_reads_back_with_the_runs_slices_and_times(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    for name in ("traced", "device"):
        out = tmp_path / f"{name}.otf2"
        summary = export_run(runs[name], "otf2", out)
        assert isinstance(summary, ExportSummary) and summary.traced
        states = _state_records(runs[name])
        enters: dict[str, list[int]] = collections.defaultdict(list)
        leaves: dict[str, list[int]] = collections.defaultdict(list)
        regions: dict[str, list[str]] = collections.defaultdict(list)
        metrics: dict[str, int] = collections.Counter()
        with otf2.reader.open(str(out / "traces.otf2")) as tr:
            assert tr.definitions.clock_properties.timer_resolution == 1_000_000_000
            groups = {g.name for g in tr.definitions.location_groups}
            props = {
                (p.location_group.name, p.name): p.value
                for p in tr.definitions.location_group_properties
            }
            for loc, ev in tr.events:
                if isinstance(ev, otf2.events.Enter):
                    enters[loc.name].append(ev.time)
                    regions[loc.name].append(ev.region.name)
                elif isinstance(ev, otf2.events.Leave):
                    leaves[loc.name].append(ev.time)
                elif isinstance(ev, otf2.events.Metric):
                    metrics[loc.name] += 1
        assert set(states) == {"src", "work", "sink"}  # every stage's state is tracked
        for stage, (ns, values) in states.items():
            # one Enter and one Leave per state slice, at the records' virtual ns
            assert len(enters[stage]) == len(leaves[stage]) == len(ns) > 0
            assert enters[stage] == ns.tolist()
            assert regions[stage] == [STATE_LABELS[v] for v in values.tolist()]
        assert metrics["counter: occupancy src -> work"] > 100  # exact level changes
        assert metrics["counter: q0 state(work) duty.busy"] >= 3
        if name == "device":
            assert groups == {"main", "accel"}
            assert props[("accel", "clock_domain")] == "accel"
            clock = json.loads(props[("accel", "clock")])
            assert clock["bursts"] >= 2 and clock["bound_width_ns_max"] > 0
            assert 0 < props[("accel", "uncertainty_ns")] < 1e6


def _perfetto(path: Path) -> tuple[Any, dict[int, Any]]:
    """A Perfetto trace file read back with Perfetto's protos, and its tracks by uuid."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks = {
        p.track_descriptor.uuid: p.track_descriptor
        for p in trace.packet
        if p.HasField("track_descriptor")
    }
    return trace, tracks


def test_perfetto_parses_with_perfettos_protos(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "t.pftrace"
    summary = export_run(runs["device"], "perfetto", out)
    trace, tracks = _perfetto(out)
    assert summary.tracks == len(tracks)
    threads = {d.thread.thread_name.split(" ")[0] for d in tracks.values() if d.HasField("thread")}
    assert threads == {"src", "work", "sink"}
    procs = {
        d.process.process_name: d.description for d in tracks.values() if d.HasField("process")
    }
    accel = next(v for k, v in procs.items() if k.startswith("accel"))
    assert '"bursts"' in accel and "accel" in accel
    counters = {d.name: u for u, d in tracks.items() if d.HasField("counter")}
    assert "occupancy src -> work" in counters and "occupancy work -> sink" not in counters
    assert any(n.startswith("clock accel") for n in counters)
    assert all(p.trusted_packet_sequence_id == 1 for p in trace.packet)
    events = [p for p in trace.packet if p.HasField("track_event")]
    ts = [p.timestamp for p in events[1:]]  # after the metadata instant: sorted by time
    assert ts == sorted(ts)
    occ_uuid = counters["occupancy src -> work"]
    levels = [
        p.track_event.double_counter_value for p in events if p.track_event.track_uuid == occ_uuid
    ]
    assert levels[0] == 0 and levels[-1] == 0 and max(levels) >= 1
    assert all(float(x).is_integer() for x in levels)
    states = _state_records(runs["device"])
    assert summary.slices == sum(len(ns) for ns, _ in states.values())
    for stage, (ns, values) in states.items():
        (uuid,) = [
            u for u, d in tracks.items()
            if d.HasField("thread") and d.thread.thread_name.split(" ")[0] == stage
        ]  # fmt: skip
        mine = [p for p in events if p.track_event.track_uuid == uuid]
        begins = [p for p in mine if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
        ends = [p for p in mine if p.track_event.type == pb.TrackEvent.TYPE_SLICE_END]
        assert len(begins) == len(ends) == len(ns), stage
        assert [p.timestamp for p in begins] == ns.tolist()
        assert [p.track_event.name for p in begins] == [STATE_LABELS[v] for v in values.tolist()]
    instants = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_INSTANT]
    # + the stack samples kept, + the metadata instant
    assert len(instants) == summary.events + summary.samples + 1
    meta = json.loads(instants[0].track_event.debug_annotations[0].string_value)
    assert {d["name"] for d in meta["clock_domains"]} == {"host", "accel"}


def _check_chrome(path: Path) -> dict[str, list[dict[str, object]]]:
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns" and isinstance(doc["metadata"], dict)
    by_ph: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        for key in ("ph", "ts", "pid", "tid", "name"):
            assert key in e, (key, e)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        by_ph[str(e["ph"])].append(e)
    assert set(by_ph) <= {"M", "X", "C", "i"}
    assert not {e["name"] for e in by_ph["i"]} & {"enter", "exit"}  # calls are slices
    for e in by_ph["X"]:
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    for e in by_ph["C"]:
        args = e["args"]
        assert isinstance(args, dict) and all(isinstance(v, (int, float)) for v in args.values())
    per_thread: dict[tuple[object, object], list[tuple[float, float]]] = collections.defaultdict(
        list
    )
    for e in by_ph["X"]:
        if e["cat"] != "state":
            continue  # calls nest (checked where there are any)
        per_thread[(e["pid"], e["tid"])].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))  # type: ignore[arg-type]
    for spans in per_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(spans))
    return by_ph


def test_chrome_json_is_valid_trace_event_json(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    summary = export_run(runs["traced"], "chrome", out)
    by_ph = _check_chrome(out)
    assert len(by_ph["X"]) == summary.slices > 0
    # 500 puts + 500 gets, and the stages' stack samples
    assert len(by_ph["i"]) == summary.events + summary.samples and summary.events >= 1000
    assert summary.samples > 0 and len([e for e in by_ph["i"] if e["cat"] == "sample"]) == (
        summary.samples
    )
    assert len(by_ph["C"]) == summary.counters
    names = {e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}  # type: ignore[index]
    assert {str(n).split(" ")[0] for n in names} == {"src", "work", "sink"}
    occ = [e for e in by_ph["C"] if e["name"] == "occupancy src -> work"]
    assert max(e["args"]["items"] for e in occ) <= 4 + 1  # type: ignore[index]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamscope", "export", *args],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_cli_exports_and_refuses_a_bad_format(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    proc = _cli(str(runs["traced"]), "--format", "chrome", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "chrome" in proc.stdout and out.exists()
    _check_chrome(out)
    bad = _cli(str(runs["traced"]), "--format", "svg", "-o", str(tmp_path / "x.svg"))
    assert bad.returncode != 0
    assert "unknown --format 'svg'" in bad.stderr and "perfetto" in bad.stderr
    assert "Traceback" not in bad.stderr
    missing = _cli(str(tmp_path / "nope.duckdb"), "--format", "chrome", "-o", str(out))
    assert missing.returncode != 0 and "does not exist" in missing.stderr


def test_a_run_without_raw_records_exports_counters_from_frames(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "plain.json"
    proc = _cli(str(runs["plain"]), "--format", "chrome", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    by_ph = _check_chrome(out)
    assert not by_ph["X"] and not by_ph["i"]  # no raw records
    with ss.load(runs["plain"]) as run:
        _, rows = run.sql(
            "SELECT count(*) FROM stat WHERE query_id = 1 AND stat = 'mean' AND value IS NOT NULL"
        )
        tl = build_timeline(run)
    assert not tl.traced
    occ = [e for e in by_ph["C"] if e["name"] == "occupancy src -> work"]
    assert len(occ) == rows[0][0] > 0
    duty = [e for e in by_ph["C"] if e["name"] == "q0 state(work) duty.busy"]
    assert len(duty) == rows[0][0] + 1  # each frame, held to the last frame's end


# --- traced function calls: enter/exit slices, named by function, nested ---------------------


def _short(name: object) -> str:
    """``module:qualname`` → ``qualname``; state slices' names as they are."""
    return str(name).rpartition(":")[2]


def _calls_timeline(path: Path, *, own_track: bool) -> Timeline:
    """The traced run's timeline; with ``own_track``, as if its calls crossed the state slices'
    bounds (so every writer's separate calls track is exercised on real calls too)."""
    with ss.load(path) as run:
        tl = build_timeline(run)
    assert {_short(f) for f in tl.functions} >= set(EXPECTED_CALLS)
    assert tl.calls_unmatched == 0 and tl.calls_open_at_end == 0
    work = next(t.tid for t in tl.threads if t.name == "work")
    if own_track:
        tl = dataclasses.replace(tl, call_tracks=(work,))
    return tl


def _assert_nested(events: list[tuple[int, bool, str]]) -> collections.Counter[str]:
    """One track's (time, is_begin, name) in file order: times never go back, every end closes
    the innermost open slice, nothing is left open. Returns the begins per name."""
    stack: list[str] = []
    begins: collections.Counter[str] = collections.Counter()
    last = -1
    for t, begin, name in events:
        assert t >= last
        last = t
        if begin:
            stack.append(name)
            begins[name] += 1
        else:
            assert stack.pop() == name
    assert not stack
    return begins


@pytest.mark.parametrize("own_track", [False, True])
def test_chrome_shows_traced_calls_nested_by_function(
    runs: dict[str, Path], tmp_path: Path, own_track: bool
) -> None:
    tl = _calls_timeline(runs["calls"], own_track=own_track)
    out = tmp_path / "calls.json"
    write_timeline(tl, "chrome", out)
    by_ph = _check_chrome(out)
    calls = [e for e in by_ph["X"] if e["cat"] == "call"]
    assert collections.Counter(_short(e["name"]) for e in calls) == EXPECTED_CALLS
    assert not [e for e in by_ph["i"] if e["name"] in ("enter", "exit")]
    names = {e["tid"]: e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}  # type: ignore[index]
    tids = {e["tid"] for e in calls}
    assert len(tids) == 1
    assert str(names[tids.pop()]).startswith("work calls" if own_track else "work (")

    def ns(x: object) -> int:
        return round(float(x) * 1000)  # type: ignore[arg-type]

    # children inside parents: by start, longest first, each inside the innermost open call
    spans = sorted(
        ((ns(e["ts"]), -ns(e["dur"]), e["args"]["depth"], _short(e["name"])) for e in calls),  # type: ignore[index]
    )
    parent = {"_outer": "_traced_work", "_inner": "_outer"}
    stack: list[tuple[int, int, str]] = []  # (end, depth, name)
    for start, neg_dur, depth, name in spans:
        assert -neg_dur > 0
        while stack and stack[-1][0] <= start and not (stack[-1][0] == start and neg_dur == 0):
            stack.pop()
        assert len(stack) == depth
        if depth:
            end, _, outer = stack[-1]
            assert start - neg_dur <= end and outer == parent[name]
        stack.append((start - neg_dur, depth, name))
    # in the same thread track as the state slices, each call inside a state slice
    if not own_track:
        states = sorted(
            (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in by_ph["X"] if e["cat"] == "state"
        )
        starts = [a for a, _ in states]
        for start, neg_dur, depth, _ in spans:
            if depth == 0:
                i = np.searchsorted(starts, start, side="right") - 1
                assert i >= 0 and start - neg_dur <= states[i][1]


@pytest.mark.parametrize("own_track", [False, True])
def test_otf2_shows_traced_calls_as_nested_regions(
    runs: dict[str, Path], tmp_path: Path, own_track: bool
) -> None:
    tl = _calls_timeline(runs["calls"], own_track=own_track)
    out = tmp_path / "calls.otf2"
    summary = write_timeline(tl, "otf2", out)
    per_loc: dict[str, list[tuple[int, bool, str]]] = collections.defaultdict(list)
    leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with otf2.reader.open(str(out / "traces.otf2")) as tr:
        locations = [loc.name for loc in tr.definitions.locations]
        for loc, ev in tr.events:
            if isinstance(ev, otf2.events.Enter):
                per_loc[loc.name].append((ev.time, True, ev.region.name))
            elif isinstance(ev, otf2.events.Leave):
                per_loc[loc.name].append((ev.time, False, ev.region.name))
                leaves[loc.name][_short(ev.region.name)] += 1
    assert summary.tracks == len(locations)
    assert ("work calls" in locations) == own_track
    where = "work calls" if own_track else "work"
    enters = {loc: _assert_nested(evs) for loc, evs in per_loc.items()}
    calls = {k: v for k, v in enters[where].items() if k not in STATE_LABELS}
    assert {_short(k): v for k, v in calls.items()} == EXPECTED_CALLS
    assert {k: v for k, v in leaves[where].items() if k not in STATE_LABELS} == EXPECTED_CALLS
    states = sum(v for k, v in enters["work"].items() if k in STATE_LABELS)
    assert states == len(_state_records(runs["calls"])["work"][0]) > 0
    if own_track:
        assert set(enters["work calls"]) == set(calls)  # only calls there


@pytest.mark.parametrize("own_track", [False, True])
def test_perfetto_shows_traced_calls_as_nested_slices(
    runs: dict[str, Path], tmp_path: Path, own_track: bool
) -> None:
    tl = _calls_timeline(runs["calls"], own_track=own_track)
    out = tmp_path / "calls.pftrace"
    summary = write_timeline(tl, "perfetto", out)
    trace, tracks = _perfetto(out)
    assert summary.tracks == len(tracks)
    work = next(u for u, d in tracks.items() if d.thread.thread_name.startswith("work "))
    calls_track = [u for u, d in tracks.items() if d.name == "work calls"]
    assert len(calls_track) == int(own_track)
    if own_track:
        assert tracks[calls_track[0]].parent_uuid == work
    per_track: dict[int, list[tuple[int, bool, str]]] = collections.defaultdict(list)
    open_names: dict[int, list[str]] = collections.defaultdict(list)
    for p in trace.packet:
        te = p.track_event
        if not p.HasField("track_event") or te.type not in (
            pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END
        ):  # fmt: skip
            continue
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_names[te.track_uuid].append(te.name)
            per_track[te.track_uuid].append((p.timestamp, True, te.name))
        else:  # an end names nothing: it closes the innermost open slice of its track
            per_track[te.track_uuid].append((p.timestamp, False, open_names[te.track_uuid].pop()))
    begins = {u: _assert_nested(evs) for u, evs in per_track.items()}
    where = calls_track[0] if own_track else work
    calls = {_short(k): v for k, v in begins[where].items() if k not in STATE_LABELS}
    assert calls == EXPECTED_CALLS
    states = sum(v for k, v in begins[work].items() if k in STATE_LABELS)
    assert states == len(_state_records(runs["calls"])["work"][0]) > 0
    # and where calls share the thread's track, each one sits inside a state slice
    if not own_track:
        depth = 0
        for _, begin, name in per_track[work]:
            if name not in STATE_LABELS:
                assert depth >= 1 or not begin
            elif begin:
                depth += 1
            else:
                depth -= 1


def test_otf2_shifts_times_before_the_start_instead_of_failing(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """OTF2's times are unsigned: frames (hence counter samples) before the run's virtual zero
    are written shifted, whole, and the archive says by how much."""
    import duckdb

    copy = tmp_path / "early.duckdb"
    copy.write_bytes(runs["traced"].read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute("UPDATE frame SET t_start_ns = t_start_ns - 7000, t_end_ns = t_end_ns - 7000")
    out = tmp_path / "early.otf2"
    export_run(copy, "otf2", out)
    with otf2.reader.open(str(out / "traces.otf2")) as tr:
        shift = {p.name: p.value for p in tr.definitions.system_tree_node_properties}
        times = [ev.time for _, ev in tr.events]
    assert shift["time_shift_ns"] >= 7000
    assert min(times) >= 0


def test_an_ordinary_run_exports_its_last_stretch_from_the_flight_recorder(
    tmp_path: Path,
) -> None:
    """No --trace: the flight recorder keeps the latest 400 raw records, so the export shows
    state slices and occupancy for the run's last stretch and says the rest was let go; the
    frames are whole either way, and with the recorder off nothing raw is kept."""
    app = tmp_path / "app.py"
    app.write_text(
        "import time\nimport streamscope as ss\n"
        "def pipeline(argv):\n"
        "    p = ss.Pipeline('flight')\n"
        "    p.add('src', range(1500))\n"
        "    p.add('work', lambda x: (time.sleep(0.0004), x)[1])\n"
        "    p.add('sink', lambda x: None)\n"
        "    p.chain('src', 'work', 'sink', capacity=4)\n"
        "    return p\n"
    )
    cli = Path(sys.executable).with_name("streamscope")
    runs = {}
    for n in (400, 0):
        out = tmp_path / f"f{n}.duckdb"
        proc = subprocess.run(
            [str(cli), "run", str(app), "-q", "occupancy(src -> work): mean", "-o", str(out),
             "--quiet", "--flight-records", str(n)],
            capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        runs[n] = out
    with ss.load(runs[400]) as run:
        (row,) = zip(*run.table("flight").values(), strict=True)
        capacity, kept, overwritten = (int(v) for v in row)
        assert (capacity, kept) == (400, 400) and overwritten > 1000
        rec = run.table("record")
        assert len(rec["probe_id"]) == 400
        states = {p.id for p in run.topology.probes if p.kind == "state"}
        assert np.isin(rec["probe_id"], list(states)).any()
        tl = build_timeline(run)
        duration = run.duration_ns or 0
        assert len(tl.slices) > 0 and not tl.traced and tl.flight_overwritten == overwritten
        # the last stretch only: no slice starts in the run's first half
        assert int(tl.slices.start_ns.min()) > duration // 2
        summary = export_run(run, "chrome", tmp_path / "f.json")
        assert "flight recorder" in summary.line()
    with ss.load(runs[0]) as run:
        assert len(run.table("record")["probe_id"]) == 0
        assert build_timeline(run).slices.start_ns.size == 0
