"""Chrome trace-event JSON (chrome://tracing, Perfetto UI, Speedscope) from a ``Timeline``.

In: a ``Timeline``. Out: one JSON document ``{"traceEvents": [...], "displayTimeUnit": "ns",
"metadata": {...}}`` written to a path: ``M`` events name processes (one per resource) and
threads (one per stage, and a "STAGE calls" thread where traced calls cannot nest with its
state slices), ``X`` events are state slices (category ``state``) and traced calls (category
``call``, named by function, in the order they nest), ``C`` events counter samples and ``i``
events other raw records; ``ts``/``dur`` are µs (floats, to the ns) of virtual time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import STATE_LABELS, SampledState
from streamscope.export.calls import nest_events
from streamscope.export.tracks import KIND_NAMES, Timeline


def _us(ns: NDArray[np.int64]) -> list[str]:
    """Integer ns as exact decimal µs strings (``1234567`` → ``"1234.567"``)."""
    q, r = np.divmod(np.asarray(ns, dtype=np.int64), 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist(), strict=True)]


def calls_tid(tid: int) -> int:
    """The thread id of a stage's calls where they cannot nest with its state slices."""
    return 100_000 + tid


def chrome_events(tl: Timeline) -> list[str]:
    """Every trace event of ``tl`` as one JSON object text each (metadata, slices, calls,
    counters, instants, in that order)."""
    pid_of_tid = np.zeros(max([t.tid for t in tl.threads], default=0) + 1, dtype=np.int64)
    for t in tl.threads:
        pid_of_tid[t.tid] = t.pid
    return [
        *_metadata_events(tl),
        *_slice_events(tl, pid_of_tid),
        *_call_events(tl, pid_of_tid),
        *_counter_events(tl),
        *_instant_events(tl, pid_of_tid),
        *_sample_events(tl, pid_of_tid),
    ]


def _metadata_events(tl: Timeline) -> list[str]:
    """``M`` events: each process's name and sort index, each stage thread's name, then the
    name of each stage's calls thread where it has one."""
    out: list[str] = []
    for p in tl.processes:
        name = json.dumps(f"{p.name} [{p.kind}, clock {p.clock_domain}]")
        out.append(
            f'{{"ph":"M","pid":{p.pid},"tid":0,"ts":0,"name":"process_name","args":{{"name":{name}}}}}'
        )
        out.append(
            f'{{"ph":"M","pid":{p.pid},"tid":0,"ts":0,"name":"process_sort_index","args":{{"sort_index":{p.pid}}}}}'
        )
    for t in tl.threads:
        name = json.dumps(f"{t.label} ({t.role})")
        out.append(
            f'{{"ph":"M","pid":{t.pid},"tid":{t.tid},"ts":0,"name":"thread_name","args":{{"name":{name}}}}}'
        )
    for t in tl.threads:
        if t.tid in tl.call_tracks:
            name = json.dumps(f"{t.label} calls")
            out.append(
                f'{{"ph":"M","pid":{t.pid},"tid":{calls_tid(t.tid)},"ts":0,"name":"thread_name","args":{{"name":{name}}}}}'
            )
    return out


def _slice_events(tl: Timeline, pid_of_tid: NDArray[np.int64]) -> list[str]:
    """An ``X`` event per state slice, named by its state."""
    s = tl.slices
    labels = [json.dumps(x) for x in STATE_LABELS]
    return [
        f'{{"ph":"X","pid":{p},"tid":{t},"ts":{ts},"dur":{d},"name":{labels[k]},"cat":"state"}}'
        for p, t, ts, d, k in zip(
            pid_of_tid[s.tid].tolist(),
            s.tid.tolist(),
            _us(s.start_ns),
            _us(s.end_ns - s.start_ns),
            s.state.tolist(),
            strict=True,
        )
    ]


def _counter_events(tl: Timeline) -> list[str]:
    """A ``C`` event per finite counter sample."""
    out: list[str] = []
    for c in tl.counters:
        name = json.dumps(c.name)
        unit = json.dumps(c.unit or "value")
        ok = np.isfinite(c.values)
        out.extend(
            f'{{"ph":"C","pid":{c.pid},"tid":0,"ts":{ts},"name":{name},"cat":"{c.group}",'
            f'"args":{{{unit}:{v!r}}}}}'
            for ts, v in zip(_us(c.t_ns[ok]), c.values[ok].tolist(), strict=True)
        )
    return out


def _instant_events(tl: Timeline, pid_of_tid: NDArray[np.int64]) -> list[str]:
    """An ``i`` event per other raw record, named by its kind, with its value and probe."""
    i = tl.instants
    kinds = {k: json.dumps(v) for k, v in KIND_NAMES.items()}
    return [
        f'{{"ph":"i","s":"t","pid":{p},"tid":{t},"ts":{ts},"name":{kinds.get(k, k)},'
        f'"cat":"record","args":{{"value":{v},"probe":{pr}}}}}'
        for p, t, ts, k, v, pr in zip(
            pid_of_tid[i.tid].tolist(),
            i.tid.tolist(),
            _us(i.t_ns),
            i.kind.tolist(),
            i.value.tolist(),
            i.probe.tolist(),
            strict=True,
        )
    ]


def _sample_events(tl: Timeline, pid_of_tid: NDArray[np.int64]) -> list[str]:
    """An ``i`` event per stack sample kept, named by the function it was in, with its state
    and stack."""
    sm = tl.samples
    labels = [s.label for s in SampledState]
    out = []
    for p, t, ts, st, k in zip(pid_of_tid[sm.tid].tolist(), sm.tid.tolist(), _us(sm.t_ns),
                               sm.state.tolist(), sm.stack.tolist(), strict=True):  # fmt: skip
        stack = tl.stack_names[k] if k >= 0 else ""
        state = labels[st] if 0 <= st < len(labels) else "sampled"
        name = json.dumps(stack.rsplit(";", 1)[-1] if stack else f"({state})")
        out.append(
            f'{{"ph":"i","s":"t","pid":{p},"tid":{t},"ts":{ts},"name":{name},"cat":"sample",'
            f'"args":{{"state":{json.dumps(state)},"stack":{json.dumps(stack)}}}}}'
        )
    return out


def _call_events(tl: Timeline, pid_of_tid: NDArray[np.int64]) -> list[str]:
    """An ``X`` event per traced call, in the order their begins nest (viewers nest ``X``
    events by time; at equal times, by the order they come in)."""
    ev = nest_events(tl)
    first = ev.call & ev.begin
    i = ev.index[first]
    c = tl.calls
    tid = np.where(ev.calls_track[first], calls_tid(0) + ev.tid[first], ev.tid[first])
    names = [json.dumps(x) for x in tl.function_names()]
    return [
        f'{{"ph":"X","pid":{p},"tid":{t},"ts":{ts},"dur":{d},"name":{names[f]},"cat":"call",'
        f'"args":{{"depth":{depth}}}}}'
        for p, t, ts, d, f, depth in zip(
            pid_of_tid[ev.tid[first]].tolist(),
            tid.tolist(),
            _us(c.start_ns[i]),
            _us(c.end_ns[i] - c.start_ns[i]),
            c.function[i].tolist(),
            c.depth[i].tolist(),
            strict=True,
        )
    ]


def write_chrome(tl: Timeline, path: str | Path) -> int:
    """Write ``tl`` as Chrome trace-event JSON to ``path``; returns the number of events."""
    events = chrome_events(tl)
    meta = json.dumps(tl.metadata())
    with Path(path).open("w", encoding="utf-8") as f:
        f.write('{"displayTimeUnit":"ns","metadata":')
        f.write(meta)
        f.write(',"traceEvents":[\n')
        f.write(",\n".join(events))
        f.write("\n]}\n")
    return len(events)


class ChromeExporter:
    """The ``chrome`` format (``export/base.py``)."""

    name = "chrome"
    output_file_extension = ".json"

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        written = write_chrome(timeline, path)
        return len(timeline.processes) + len(timeline.threads) + len(timeline.counters), written
