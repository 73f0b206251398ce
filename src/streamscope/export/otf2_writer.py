"""OTF2 archives (Score-P's Open Trace Format 2, read by Vampir and others) from a ``Timeline``.

In: a ``Timeline``. Out: an OTF2 archive in a directory (``<dir>/traces.otf2`` is its anchor),
written with the OTF2 library: timer resolution 1 ns (10⁹ ticks per second), timestamps are
virtual ns since the run's start (shifted whole when a record lies before it: OTF2 times are
unsigned; the root's ``time_shift_ns`` property says by how much). Each resource is a location
group (properties: its clock domain, nominal tick, bound widths), each stage a CPU-thread
location in it; a region per state (idle, busy, blocked_in, blocked_out) entered and left for
every state slice, and a region per traced function entered and left for every call, nested
inside them (or, where calls cross state slices' bounds, on a "STAGE calls" location of the same
group); other raw records as ``ParameterInt`` events on their stage's location; each counter
series as a metric (one member, double) on a metric location of its own. OTF2's writer takes one
call per event.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from streamscope.core.records import STATE_LABELS
from streamscope.export.calls import nest_events
from streamscope.export.tracks import KIND_NAMES, SliceEvents, Timeline

TIMER_RESOLUTION = 1_000_000_000  # ticks per second: 1 tick = 1 ns


def write_otf2(tl: Timeline, path: str | Path) -> tuple[int, int]:
    """Write ``tl`` as an OTF2 archive in directory ``path`` (replaced if it exists); returns
    (locations, events)."""
    import otf2
    from otf2.enums import LocationGroupType, LocationType, ParameterType, RegionRole

    out = Path(path)
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    out.mkdir(parents=True)
    events = 0
    with otf2.writer.open(str(out), timer_resolution=TIMER_RESOLUTION) as trace:
        d = trace.definitions
        root = d.system_tree_node(f"streamscope run {tl.name}")
        d.system_tree_node_property(root, "metadata", value=json.dumps(tl.metadata()))
        domains = {x.name: x for x in tl.domains}
        groups: dict[int, Any] = {}
        for pr in tl.processes:
            g = d.location_group(
                pr.name, location_group_type=LocationGroupType.PROCESS, system_tree_parent=root
            )
            d.location_group_property(g, "clock_domain", value=pr.clock_domain)
            dom = domains.get(pr.clock_domain)
            if dom is not None:
                d.location_group_property(g, "clock", value=json.dumps(dom.to_dict()))
            d.location_group_property(
                g, "uncertainty_ns", value=float(tl.uncertainty_ns.get(pr.clock_domain, 0.0))
            )
            groups[pr.pid] = g
        labels = [*STATE_LABELS, *tl.function_names()[1:]]
        regions = [d.region(x, region_role=RegionRole.FUNCTION) for x in labels]
        params = {
            k: d.parameter(v, parameter_type=ParameterType.INT64) for k, v in KIND_NAMES.items()
        }
        locations = 0
        ev, inst = nest_events(tl), tl.instants
        region = _region_ids(tl, ev)
        # OTF2 times are unsigned: a run whose records start before its virtual zero (a device
        # clock's bounds reach back, a damaged file) is shifted whole, and says by how much.
        shift = _shift(ev.t_ns, inst.t_ns, *(c.t_ns for c in tl.counters))
        d.system_tree_node_property(root, "time_shift_ns", value=shift)
        for t in tl.threads:
            loc = d.location(t.name, type=LocationType.CPU_THREAD, group=groups[t.pid])
            locations += 1
            w = trace.event_writer_from_location(loc)
            m = (ev.tid == t.tid) & ~ev.calls_track
            mi = inst.tid == t.tid
            k = int(mi.sum())
            # Enter and Leave in the order they nest, then the records merged in by a stable
            # sort on time: the pairs stay well nested even at equal times
            ts = np.concatenate([ev.t_ns[m], inst.t_ns[mi]]) + shift
            what = np.concatenate([ev.begin[m].astype(np.int8), np.full(k, 2, dtype=np.int8)])
            arg = np.concatenate([region[m], np.arange(k)]).astype(np.int64)
            order = np.argsort(ts, kind="stable")
            kinds, values = inst.kind[mi].tolist(), inst.value[mi].tolist()
            for time, wh, a in zip(
                ts[order].tolist(), what[order].tolist(), arg[order].tolist(), strict=True
            ):
                if wh == 1:
                    w.enter(time, regions[a])
                elif wh == 0:
                    w.leave(time, regions[a])
                else:
                    w.parameter_int(time, params.get(kinds[a], params[1]), values[a])
            events += len(ts)
            if t.tid in tl.call_tracks:
                loc = d.location(
                    f"{t.name} calls", type=LocationType.CPU_THREAD, group=groups[t.pid]
                )
                locations += 1
                w = trace.event_writer_from_location(loc)
                m = (ev.tid == t.tid) & ev.calls_track
                for time, enter, a in zip(
                    (ev.t_ns[m] + shift).tolist(),
                    ev.begin[m].tolist(),
                    region[m].tolist(),
                    strict=True,
                ):
                    if enter:
                        w.enter(time, regions[a])
                    else:
                        w.leave(time, regions[a])
                events += int(m.sum())
        for c in tl.counters:
            loc = d.location(f"counter: {c.name}", type=LocationType.METRIC, group=groups[c.pid])
            locations += 1
            metric = d.metric(c.name, unit=c.unit)
            w = trace.event_writer_from_location(loc)
            ok = np.isfinite(c.values)
            for time, v in zip((c.t_ns[ok] + shift).tolist(), c.values[ok].tolist(), strict=True):
                w.metric(time, metric, v)
            events += int(ok.sum())
        trace._realtime_timestamp = tl.started_unix_ns / 1e9  # the run's wall-clock start
    return locations, events


def _shift(*times: np.ndarray) -> int:
    """How many ns to add to every time so that none is negative (0 for most runs)."""
    lows = [int(np.min(t)) for t in times if len(t)]
    return max(0, -min(lows)) if lows else 0


def _region_ids(tl: Timeline, ev: SliceEvents) -> np.ndarray:
    """Per slice event, its region: the state's, or ``len(STATE_LABELS) + function - 1``."""
    region = np.zeros(len(ev), dtype=np.int64)
    region[~ev.call] = tl.slices.state[ev.index[~ev.call]]
    region[ev.call] = len(STATE_LABELS) - 1 + tl.calls.function[ev.index[ev.call]]
    return region


class OTF2Exporter:
    """The ``otf2`` format (``export/base.py``)."""

    name = "otf2"
    output_file_extension = ".otf2"

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        return write_otf2(timeline, path)
