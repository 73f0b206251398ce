"""The loop each stage runs in its thread: read inputs, call the user's code, emit outputs.

In: a stage spec, its input and output channels, its state tracker (if a query watches it).
Out: items on the outputs, end-of-stream on each output when done, or a reported error.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.core.stream import EOS, Aborted
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.channels.shm import ProcessChannel
from streamscope.pipeline.describe.stage import StageBody
from streamscope.probes.taps import RingTap
from streamscope.probes.user import set_current_stage
from streamscope.transport.control import Control

Channel = ThreadChannel | ProcessChannel | LinkChannel

#: One item about every this many ns of the stage's time has the wall and CPU time of the
#: stage's own code on it measured: its service time, a sample of the distribution the what-if
#: model draws from (``model.network``). Timing an item costs ~1-2 us (clock and CPU reads, the
#: emit wrapped, the reservoir), so at most ~0.3 % of the stage's time whatever its items take;
#: timing every item of 20 us or more cost a pipeline of 40-115 us items 8 % (a few thousand
#: samples a stage are all the model needs). Items slower than this are all timed.
SERVICE_SPACING_NS = 500_000
#: Items between two timed ones at most (quick items: one in this many).
SERVICE_SKIP_MAX = 1023
#: Service-time samples a stage keeps at most (a uniform reservoir over the run).
SERVICE_KEEP = 4096


@dataclass(slots=True)
class LoopStats:
    """Where a stage thread's time went, measured while it ran: ``cpu_ns`` the thread's CPU
    time from the stage's start to its end, ``items`` the items it took (or, for a source,
    made), ``items_out`` the items it put (a broadcast counted once), and over ``samples`` of
    them (the items ``_sampled_loop`` times), ``user_ns`` of CPU time inside the stage's own
    code and ``user_wall_ns`` of wall time there; ``runq_ns``, the thread's time runnable but
    waiting for a core (the OS's run queue: what else the machine ran took it). ``service``:
    the wall time (ns) of the stage's own code on the items timed (``_sampled_loop``; at most
    ``SERVICE_KEEP``, a uniform reservoir; for a source, its generator's step). The rest of
    ``cpu_ns`` is the runner's loop, the channels and the probes. Mutable: the loop adds to
    it as it samples, and sets its totals at its end."""

    items: int = 0
    samples: int = 0
    user_ns: int = 0
    cpu_ns: int = 0
    items_out: int = 0
    user_wall_ns: int = 0
    runq_ns: int = 0
    service: list[int] = field(default_factory=list)
    seen: int = 0  # service times offered to the reservoir

    def keep(self, wall_ns: int) -> None:
        """One item's service time into the reservoir."""
        self.seen += 1
        if len(self.service) < SERVICE_KEEP:
            self.service.append(wall_ns)
        else:
            j = random.randrange(self.seen)
            if j < SERVICE_KEEP:
                self.service[j] = wall_ns

    def to_dict(self) -> dict[str, int]:
        return {"items": self.items, "samples": self.samples, "user_ns": self.user_ns,
                "cpu_ns": self.cpu_ns, "items_out": self.items_out,
                "user_wall_ns": self.user_wall_ns, "runq_ns": self.runq_ns,
                "switch_ns": round(sys.getswitchinterval() * 1e9)}  # fmt: skip


def runq_ns() -> int:
    """The calling thread's time so far runnable but waiting for a core (ns; the second field
    of ``/proc/thread-self/schedstat``), -1 where the OS does not say. A thread waiting for
    the interpreter lock sleeps, so this is the cores' share alone: what the what-if model
    removes from the wall time of a stage's code, as its simulation shares the cores itself."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def runner_report(control: Control | None) -> Callable[[str, LoopStats], None] | None:
    """How a stage's loop reports its time figures: a note to the monitor (None: no monitor,
    and the loop measures nothing)."""
    if control is None:
        return None

    def report(stage: str, stats: LoopStats) -> None:
        control.note({"runner": {stage: stats.to_dict()}, "service": {stage: stats.service}})

    return report


@dataclass(frozen=True, slots=True)
class StageProbes:
    """What one stage's loop records: state changes, and per iteration its length, its wait
    for input and its time in output calls (each only when a query asks); ``settle`` hands the
    stage's held probe samples to storage when the stage ends."""

    tracker: native.StateTracker | None = None
    iteration: RingTap | None = None
    input_wait: RingTap | None = None
    output_wait: RingTap | None = None
    now: Callable[[], int] | None = None
    settle: Callable[[], None] | None = None
    #: Function tracing: bind the stage's thread to its trace tap, and unbind it.
    bind: Callable[[], None] | None = None
    unbind: Callable[[], None] | None = None
    #: When set (a monitored run), the loop samples where its thread's time goes and hands
    #: the totals to it when the stage ends (``LoopStats``).
    report: Callable[[str, LoopStats], None] | None = None

    @property
    def timed(self) -> bool:
        return (self.iteration or self.input_wait or self.output_wait) is not None


#: The end of a stage's input (``next``'s default: never an item).
_DONE = object()


def _items(ins: list[Channel], outs: list[Channel], fanout: str) -> int:
    """Items a stage took (or, a source, made), as its channels counted them."""
    if ins:
        return sum(ch.items_out for ch in ins)
    return _items_out(outs, fanout)


def _items_out(outs: list[Channel], fanout: str) -> int:
    """Items a stage put, as its output channels counted them (a broadcast once)."""
    made = sum(ch.items_in for ch in outs)
    return made // len(outs) if fanout == "broadcast" and outs else made


def _emitter(fanout: str, outs: list[Channel]) -> Callable[[Any], None]:
    if not outs:
        return lambda item: None
    if len(outs) == 1:
        return outs[0].put
    if fanout == "broadcast":

        def broadcast(item: Any) -> None:
            for ch in outs:
                ch.put(item)

        return broadcast
    state = [0]
    n = len(outs)

    def roundrobin(item: Any) -> None:
        i = state[0]
        outs[i].put(item)
        state[0] = (i + 1) % n

    return roundrobin


def _inputs(fanin: str, ins: list[Channel]) -> Any:
    """Yield input items until every input has ended."""
    if len(ins) == 1:
        get = ins[0].get
        while (item := get()) is not EOS:
            yield item
        return
    active = list(ins)
    if fanin == "zip":
        while active:
            batch = []
            for ch in list(active):
                item = ch.get()
                if item is EOS:
                    active.remove(ch)
                else:
                    batch.append(item)
            if batch:
                yield tuple(batch)
        return
    i = 0
    while active:
        ch = active[i % len(active)]
        item = ch.get()
        if item is EOS:
            active.remove(ch)
            continue
        i += 1
        yield item


def run_stage(
    spec: Any,
    ins: list[Channel],
    outs: list[Channel],
    probes: StageProbes | None,
    on_error: Callable[[str, BaseException], None],
) -> None:
    """Thread body of one stage. Errors go to ``on_error``; nothing escapes."""
    if probes is None:
        probes = StageProbes()
    tracker = probes.tracker
    # The channels this thread waits on mark its state through the tracker bound to it.
    native.bind_tracker(tracker)
    set_current_stage(spec.name)
    if probes.bind is not None:
        probes.bind()
    try:
        body = StageBody(spec.name, spec.obj)
        if tracker is not None:
            tracker.set(State.BUSY)
        body.setup()
        _loop(spec, body, ins, outs, probes)
        body.teardown()
        if probes.settle is not None:
            probes.settle()
        for ch in outs:
            ch.put(EOS)
        if tracker is not None:
            tracker.set(State.IDLE)
    except Aborted:
        if tracker is not None:
            tracker.set(State.IDLE)  # stopped (the run is ending): no longer working
    except BaseException as exc:
        if probes.settle is not None:
            probes.settle()  # what the stage sampled before it failed is kept
        on_error(spec.name, exc)
    finally:
        if probes.unbind is not None:
            probes.unbind()
        native.bind_tracker(None)
        set_current_stage(None)


def _loop(
    spec: Any, body: StageBody, ins: list[Channel], outs: list[Channel], probes: StageProbes
) -> None:
    """The stage's loop over its items, as its probes ask: each iteration timed, the thread's
    time sampled for a report, or nothing added."""
    emit = _emitter(spec.fanout, outs)
    inputs = _inputs(spec.fanin, ins) if ins else None
    if probes.timed:
        _timed_loop(body, inputs, emit, probes)
    elif probes.report is not None:
        stats = LoopStats()
        t0, q0 = time.thread_time_ns(), runq_ns()
        try:
            _sampled_loop(body, inputs, emit, stats)
        finally:
            stats.cpu_ns = time.thread_time_ns() - t0
            stats.runq_ns = max(runq_ns() - q0, 0) if q0 >= 0 else 0
            stats.items = _items(ins, outs, spec.fanout)
            stats.items_out = _items_out(outs, spec.fanout)
            probes.report(spec.name, stats)
    elif inputs is None:
        for item in body.generate():
            emit(item)
    else:
        process = body.process
        for item in inputs:
            for out in process(item):
                emit(out)


def _sampled_loop(
    body: StageBody, inputs: Iterator[Any] | None, emit: Callable[[Any], None], stats: LoopStats
) -> None:
    """The stage loop, measuring the wall and thread CPU time of the stage's own code on one
    item about every ``SERVICE_SPACING_NS`` (the items between, as many as the timed items'
    mean takes to fill it, at most ``SERVICE_SKIP_MAX``): for a source, its generator's step;
    otherwise the processing of the item, its emits (channel puts, which the runner does) left
    out. The other items go through the plain loop, in runs taken with ``islice``: nothing is
    added per item. Which item is timed depends on the items timed before it, never on its
    own time. Between taking an item and the stage's code, and between the
    stage's code and its put, only a clock read: what a timed item costs comes after (the CPU
    time taken from before the get, or to after a source's put: those calls' own CPU is small,
    and a wait in them is none)."""
    cpu, wall = time.thread_time_ns, time.monotonic_ns
    fast = 0
    timed = True  # (every timed item's CPU time is measured too)
    mean = 0.0  # the timed items' mean wall time (ns), as they came

    def account(w: int, c: int) -> None:
        nonlocal fast, mean
        stats.user_ns += c
        stats.user_wall_ns += w
        stats.samples += 1
        stats.keep(w)
        mean += (w - mean) / stats.samples
        fast = min(int(SERVICE_SPACING_NS / max(mean, 1.0)), SERVICE_SKIP_MAX)

    if inputs is None:
        gen = iter(body.generate())
        while True:
            for item in islice(gen, fast):
                emit(item)
            c0 = cpu() if timed else 0
            w0 = wall()
            item = next(gen, _DONE)
            w = wall() - w0
            if item is _DONE:
                return
            emit(item)
            account(w, cpu() - c0 if timed else 0)
    process = body.process
    put = [0, 0]  # wall, CPU ns in the timed item's emits

    def timed_emit(out: Any) -> None:
        w, c = wall(), cpu() if timed else 0
        emit(out)
        put[0] += wall() - w
        if timed:
            put[1] += cpu() - c

    while True:
        for item in islice(inputs, fast):
            for out in process(item):
                emit(out)
        put[0] = put[1] = 0
        c0 = cpu() if timed else 0
        item = next(inputs, _DONE)
        w0 = wall()
        if item is _DONE:
            return
        for out in process(item):
            timed_emit(out)
        w = wall() - w0 - put[0]
        account(w, cpu() - c0 - put[1] if timed else 0)


def _timed_loop(
    body: StageBody, inputs: Iterator[Any] | None, emit: Callable[[Any], None], p: StageProbes
) -> None:
    """The stage loop, timing each iteration: ``input_wait`` from asking for an input to having
    it (not recorded for a source, whose "input" is its own generator), ``output_wait`` the
    time inside output calls, ``iteration`` from having the input to having emitted its
    outputs (for a source: from asking its generator to having emitted)."""
    assert p.now is not None
    now = p.now
    it, iw, ow = p.iteration, p.input_wait, p.output_wait
    spent = [0]
    if ow is not None:
        plain = emit

        def emit(item: Any) -> None:
            t = now()
            plain(item)
            spent[0] += now() - t

    source = inputs is None
    items: Iterator[Any] = iter(body.generate()) if inputs is None else inputs
    process = body.process
    while True:
        t_ask = now()
        try:
            item = next(items)
        except StopIteration:
            return
        t_in = now()
        if source:
            emit(item)
        else:
            if iw is not None:
                iw.record(t_in, t_in - t_ask)
            for out in process(item):
                emit(out)
        t_end = now()
        if it is not None:
            it.record(t_end, t_end - (t_ask if source else t_in))
        if ow is not None:
            ow.record(t_end, spent[0])
            spent[0] = 0
