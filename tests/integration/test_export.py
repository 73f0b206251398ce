"""``streamscope export``: real runs to Perfetto, OTF2 and Chrome JSON, each read back.

The files are checked against the run itself: slices per stage against its state records,
timestamps against the records' virtual ns, counter tracks against the channels' queries.
"""

from __future__ import annotations

import collections
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from streamscope.core.records import STATE_LABELS, Kind
from streamscope.export import ExportSummary, export_run
from streamscope.export.timeline import build_timeline, clock_models, to_virtual_ns

otf2 = pytest.importorskip("otf2")
pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

QUERIES = ["state(work): duty every 100ms", "occupancy(src -> work): mean every 100ms"]


def _work(x: int) -> int:
    time.sleep(0.0005)
    return x


def _pipeline(device: bool = False) -> ss.Pipeline:
    p = ss.Pipeline("x")
    p.add("src", range(500 if not device else 300))
    if device:  # a second clock domain; link capacity >= bulk size
        p.add("work", _work, resource=ss.EmulatedDevice("accel", bulk_size=8, transfer_us=50))
    else:
        p.add("work", lambda x: (time.sleep(0.0005), x)[1])
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=32 if device else 4)
    return p


def _run(path: Path, *, trace: bool, device: bool = False) -> Path:
    res = ss.run(_pipeline(device), QUERIES, ss.RunOptions(out=path, mode="inline", trace=trace))
    assert res.status == "completed", res.error
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("export")
    return {
        "traced": _run(d / "traced.duckdb", trace=True),
        "plain": _run(d / "plain.duckdb", trace=False),
        "device": _run(d / "device.duckdb", trace=True, device=True),
    }


def _state_records(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per stage with a state probe: the records' virtual ns (sorted) and states, computed here
    from the record table, the calibration and t0."""
    with ss.load(path) as run:
        models = clock_models(run)
        rec = run.table("record")
        out = {}
        for p in run.topology.probes:
            if p.kind != "state":
                continue
            m = (rec["probe_id"] == p.id) & (rec["kind"] == int(Kind.STATE))
            ns, _ = to_virtual_ns(
                rec["ticks"][m].astype(np.int64), p.domain, run.meta.t0_host_ns, models
            )
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
        assert set(states) == {"work"}
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


def test_perfetto_parses_with_perfettos_protos(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "t.pftrace"
    summary = export_run(runs["device"], "perfetto", out)
    trace = pb.Trace()
    trace.ParseFromString(out.read_bytes())
    tracks = {
        p.track_descriptor.uuid: p.track_descriptor
        for p in trace.packet
        if p.HasField("track_descriptor")
    }
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
    begins = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
    ends = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_SLICE_END]
    ns, values = _state_records(runs["device"])["work"]
    assert len(begins) == len(ends) == len(ns) == summary.slices
    assert [p.timestamp for p in begins] == ns.tolist()
    assert [p.track_event.name for p in begins] == [STATE_LABELS[v] for v in values.tolist()]
    instants = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_INSTANT]
    assert len(instants) == summary.events + 1  # + the metadata instant
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
    for e in by_ph["X"]:
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    for e in by_ph["C"]:
        args = e["args"]
        assert isinstance(args, dict) and all(isinstance(v, (int, float)) for v in args.values())
    per_thread: dict[tuple[object, object], list[tuple[float, float]]] = collections.defaultdict(
        list
    )
    for e in by_ph["X"]:
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
    assert len(by_ph["i"]) == summary.events >= 1000  # 500 puts + 500 gets
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


def test_an_untraced_run_exports_counters_from_frames(
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
