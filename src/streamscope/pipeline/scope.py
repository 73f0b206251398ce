"""One process's share of a pipeline: its taps, its state trackers and its stage threads.

In: the pipeline, its channels, the active probes and the stages this process runs. Out: taps
attached to those channels (for the process's agent) and the started stage threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from streamscope.core.clock import host_now_ticks
from streamscope.core.records import Kind
from streamscope.core.topology import ProbeInfo
from streamscope.pipeline.channel import Aborted, ThreadChannel
from streamscope.pipeline.link import LinkChannel
from streamscope.pipeline.pipeline import Pipeline
from streamscope.pipeline.worker import Channel, run_stage
from streamscope.probes.taps import DEFAULT_CAPACITY, LockedTap, RingTap, StateTracker


class Scope:
    """The channels, taps and trackers of one process."""

    def __init__(
        self,
        pipeline: Pipeline,
        channels: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        stages: list[str],
        capacity: int = DEFAULT_CAPACITY,
        now: Callable[[], int] = host_now_ticks,
    ) -> None:
        self.trackers: dict[str, StateTracker] = {}
        self.taps: list[LockedTap | RingTap] = []
        mine = set(stages)
        for p in probes:
            if p.kind == "state" and p.target in mine:
                tap = RingTap(p.id, Kind.STATE, capacity)
                self.taps.append(tap)
                self.trackers[p.target] = StateTracker(p.target, tap, now)
            elif p.kind in ("tail", "head", "send", "deliver"):
                spec = pipeline.channels[p.target]
                owner = spec.src if p.kind in ("tail", "send") else spec.dst
                if owner not in mine:
                    continue
                ch = channels[p.target]
                kind = Kind.PUT if p.kind in ("tail", "deliver") else Kind.GET
                if isinstance(ch, LinkChannel):
                    buf = ch.tail_buf if p.kind in ("tail", "send") else ch.head_buf
                    locked = LockedTap(p.id, kind, buf.mutex, capacity)
                    setattr(buf, "tail" if kind == Kind.PUT else "head", locked)
                    self.taps.append(locked)
                elif isinstance(ch, ThreadChannel):
                    locked = LockedTap(p.id, kind, ch.mutex, capacity)
                    setattr(ch, p.kind, locked)
                    self.taps.append(locked)
                else:
                    ring = RingTap(p.id, kind, capacity)
                    setattr(ch, p.kind, ring)
                    self.taps.append(ring)


def start_threads(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    scope: Scope,
    stages: list[str],
    on_error: Callable[[str, BaseException], None],
) -> list[threading.Thread]:
    threads = []
    for name in stages:
        spec = pipeline.stages[name]
        ins = [channels[c.name] for c in pipeline.inputs(name)]
        outs = [channels[c.name] for c in pipeline.outputs(name)]
        t = threading.Thread(
            target=run_stage,
            args=(spec, ins, outs, scope.trackers.get(name), on_error),
            name=f"stage-{name}",
            daemon=True,
        )
        threads.append(t)
    for t in threads:
        t.start()
    return threads


def start_links(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    stages: list[str],
    on_error: Callable[[str, BaseException], None],
) -> list[threading.Thread]:
    """Start this process's side of every link channel: the mover where the producer runs,
    the receiver where the consumer runs. Their errors are reported as the stage's."""
    mine = set(stages)
    threads = []
    for spec in pipeline.channels.values():
        ch = channels[spec.name]
        if not isinstance(ch, LinkChannel):
            continue
        for stage, body, role in (
            (spec.src, ch.mover, "mover"),
            (spec.dst, ch.receiver, "receiver"),
        ):
            if stage in mine:
                threads.append(
                    threading.Thread(
                        target=_link_thread,
                        args=(stage, body, on_error),
                        name=f"link-{role}-{spec.name}",
                        daemon=True,
                    )
                )
    for t in threads:
        t.start()
    return threads


def _link_thread(
    stage: str, body: Callable[[], None], on_error: Callable[[str, BaseException], None]
) -> None:
    try:
        body()
    except Aborted:
        pass
    except BaseException as exc:
        on_error(stage, exc)
