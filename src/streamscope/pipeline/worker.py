"""The loop each stage runs in its thread: read inputs, call the user's code, emit outputs.

In: a stage spec, its input and output channels, its state tracker (if a query watches it).
Out: items on the outputs, end-of-stream on each output when done, or a reported error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.channel import EOS, Aborted, ThreadChannel
from streamscope.pipeline.link import LinkChannel
from streamscope.pipeline.shm import ProcessChannel
from streamscope.pipeline.stage import StageBody
from streamscope.probes.taps import StateTracker

Channel = ThreadChannel | ProcessChannel | LinkChannel


def _emitter(
    fanout: str, outs: list[Channel], tracker: StateTracker | None
) -> Callable[[Any], None]:
    if not outs:
        return lambda item: None
    if len(outs) == 1:
        ch = outs[0]
        return lambda item: ch.put_tracked(item, tracker)
    if fanout == "broadcast":

        def broadcast(item: Any) -> None:
            for ch in outs:
                ch.put_tracked(item, tracker)

        return broadcast
    state = [0]
    n = len(outs)

    def roundrobin(item: Any) -> None:
        i = state[0]
        outs[i].put_tracked(item, tracker)
        state[0] = (i + 1) % n

    return roundrobin


def _inputs(fanin: str, ins: list[Channel], tracker: StateTracker | None) -> Any:
    """Yield input items until every input has ended."""
    if len(ins) == 1:
        ch = ins[0]
        while True:
            item = ch.get_tracked(tracker)
            if item is EOS:
                return
            yield item
    active = list(ins)
    if fanin == "zip":
        while active:
            batch = []
            for ch in list(active):
                item = ch.get_tracked(tracker)
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
        item = ch.get_tracked(tracker)
        if item is EOS:
            active.remove(ch)
            continue
        i += 1
        yield item


def run_stage(
    spec: Any,
    ins: list[Channel],
    outs: list[Channel],
    tracker: StateTracker | None,
    on_error: Callable[[str, BaseException], None],
) -> None:
    """Thread body of one stage. Errors go to ``on_error``; nothing escapes."""
    try:
        body = StageBody(spec.name, spec.obj)
        if tracker is not None:
            tracker.set(State.BUSY)
        body.setup()
        emit = _emitter(spec.fanout, outs, tracker)
        if not ins:
            for item in body.generate():
                emit(item)
        else:
            process = body.process
            for item in _inputs(spec.fanin, ins, tracker):
                for out in process(item):
                    emit(out)
        body.teardown()
        for ch in outs:
            ch.put_tracked(EOS, tracker)
        if tracker is not None:
            tracker.set(State.IDLE)
    except Aborted:
        pass
    except BaseException as exc:
        on_error(spec.name, exc)
