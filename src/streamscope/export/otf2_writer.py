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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import STATE_LABELS
from streamscope.export.calls import nest_events, slice_labels
from streamscope.export.tracks import (
    KIND_NAMES,
    CounterSeries,
    SliceEvents,
    ThreadTrack,
    Timeline,
)

TIMER_RESOLUTION = 1_000_000_000  # ticks per second: 1 tick = 1 ns


def write_otf2(tl: Timeline, path: str | Path) -> tuple[int, int]:
    """Write ``tl`` as an OTF2 archive in directory ``path`` (replaced if it exists); returns
    (locations, events)."""
    import otf2

    out = Path(path)
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    out.mkdir(parents=True)
    locations = events = 0
    with otf2.writer.open(str(out), timer_resolution=TIMER_RESOLUTION) as trace:
        archive = _Archive.define(trace, tl)
        for t in tl.threads:
            events += archive.write_stage(t)
            locations += 1
            if t.tid in tl.call_tracks:
                events += archive.write_calls(t)
                locations += 1
        for c in tl.counters:
            events += archive.write_counter(c)
            locations += 1
        # the run's wall-clock start, not the export's (the writer offers no public setter)
        trace._realtime_timestamp = tl.started_unix_ns / 1e9
    return locations, events


@dataclass(frozen=True, slots=True)
class _Archive:
    """An open archive's writer (``trace``, its ``defs``) and what the events refer to: a
    location group per resource pid, a region per state then per traced function, a parameter
    per record kind, the slice events with their regions, and the ``shift`` of every time."""

    trace: Any
    defs: Any
    tl: Timeline
    groups: dict[int, Any]
    regions: list[Any]
    params: dict[int, Any]
    ev: SliceEvents
    region: NDArray[np.int64]
    shift: int

    @staticmethod
    def define(trace: Any, tl: Timeline) -> _Archive:
        """The run's definitions, in the archive's order: the root and its metadata, the
        location groups, the regions and parameters, the time shift."""
        from otf2.enums import ParameterType, RegionRole

        d = trace.definitions
        root = d.system_tree_node(f"streamscope run {tl.name}")
        d.system_tree_node_property(root, "metadata", value=json.dumps(tl.metadata()))
        groups = _location_groups(d, root, tl)
        labels = [*STATE_LABELS, *tl.function_names()[1:]]
        regions = [d.region(x, region_role=RegionRole.FUNCTION) for x in labels]
        params = {
            k: d.parameter(v, parameter_type=ParameterType.INT64) for k, v in KIND_NAMES.items()
        }
        ev = nest_events(tl)
        # OTF2 times are unsigned: a run whose records start before its virtual zero (a device
        # clock's bounds reach back, a damaged file) is shifted whole, and says by how much.
        shift = _shift(ev.t_ns, tl.instants.t_ns, *(c.t_ns for c in tl.counters))
        d.system_tree_node_property(root, "time_shift_ns", value=shift)
        region = slice_labels(tl, ev, len(STATE_LABELS) - 1)  # into ``regions``
        return _Archive(trace, d, tl, groups, regions, params, ev, region, shift)

    def _writer(self, name: str, pid: int, metric: bool = False) -> Any:
        """A new location of the resource ``pid``'s group, and its event writer."""
        from otf2.enums import LocationType

        kind = LocationType.METRIC if metric else LocationType.CPU_THREAD
        loc = self.defs.location(name, type=kind, group=self.groups[pid])
        return self.trace.event_writer_from_location(loc)

    def write_stage(self, t: ThreadTrack) -> int:
        """A stage's location: Enter and Leave per state slice and call on it, and a
        ``ParameterInt`` per other record; returns the events written."""
        w = self._writer(t.label, t.pid)
        ev, inst = self.ev, self.tl.instants
        m = (ev.tid == t.tid) & ~ev.calls_track
        mi = inst.tid == t.tid
        k = int(mi.sum())
        # Enter and Leave in the order they nest, then the records merged in by a stable
        # sort on time: the pairs stay well nested even at equal times
        ts = np.concatenate([ev.t_ns[m], inst.t_ns[mi]]) + self.shift
        what = np.concatenate([ev.begin[m].astype(np.int8), np.full(k, 2, dtype=np.int8)])
        arg = np.concatenate([self.region[m], np.arange(k)]).astype(np.int64)
        order = np.argsort(ts, kind="stable")
        kinds, values = inst.kind[mi].tolist(), inst.value[mi].tolist()
        for time, wh, a in zip(
            ts[order].tolist(), what[order].tolist(), arg[order].tolist(), strict=True
        ):
            if wh == 1:
                w.enter(time, self.regions[a])
            elif wh == 0:
                w.leave(time, self.regions[a])
            else:
                w.parameter_int(time, self.params.get(kinds[a], self.params[1]), values[a])
        return len(ts)

    def write_calls(self, t: ThreadTrack) -> int:
        """The "STAGE calls" location of a stage whose calls cross its state slices' bounds:
        Enter and Leave per call; returns the events written."""
        w = self._writer(f"{t.label} calls", t.pid)
        ev = self.ev
        m = (ev.tid == t.tid) & ev.calls_track
        for time, enter, a in zip(
            (ev.t_ns[m] + self.shift).tolist(), ev.begin[m].tolist(), self.region[m].tolist(),
            strict=True,
        ):  # fmt: skip
            if enter:
                w.enter(time, self.regions[a])
            else:
                w.leave(time, self.regions[a])
        return int(m.sum())

    def write_counter(self, c: CounterSeries) -> int:
        """A counter series' metric location: a value per finite sample; returns how many."""
        w = self._writer(f"counter: {c.name}", c.pid, metric=True)
        metric = self.defs.metric(c.name, unit=c.unit)
        ok = np.isfinite(c.values)
        for time, v in zip((c.t_ns[ok] + self.shift).tolist(), c.values[ok].tolist(), strict=True):
            w.metric(time, metric, v)
        return int(ok.sum())


def _location_groups(d: Any, root: Any, tl: Timeline) -> dict[int, Any]:
    """A process location group per resource, by pid, with its clock domain, the domain's fits
    and its largest bound half-width as properties."""
    from otf2.enums import LocationGroupType

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
    return groups


def _shift(*times: np.ndarray) -> int:
    """How many ns to add to every time so that none is negative (0 for most runs)."""
    lows = [int(np.min(t)) for t in times if len(t)]
    return max(0, -min(lows)) if lows else 0


class OTF2Exporter:
    """The ``otf2`` format (``export/base.py``)."""

    name = "otf2"
    output_file_extension = ".otf2"

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        return write_otf2(timeline, path)
