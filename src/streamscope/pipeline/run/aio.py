"""Stages on an asyncio event loop: ``resource=ss.Asyncio(name)``.

In: the stages placed on one asyncio resource, their channels and probes. Out: one thread
running the resource's event loop, each stage a task of it: a source's items (from an iterable,
a generator or an async generator), or per input the outputs of its function (a coroutine
function is awaited), put on its outputs as a thread stage does. A task whose input is empty,
or whose output is full, waits without holding the loop (the channel's blocking call runs in a
thread of the loop's executor) and is marked blocked in (out) meanwhile; running or awaiting
anything else it is busy; once done, idle. Errors go to ``on_error`` as a thread stage's do.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.core.stream import EOS, Aborted
from streamscope.pipeline.describe.specs import LOOP_LAG
from streamscope.pipeline.describe.stage import StageBody
from streamscope.pipeline.run.looplag import LagSampler
from streamscope.pipeline.run.worker import Channel, StageProbes
from streamscope.probes.user import probe as user_probe


async def _wait(
    loop: asyncio.AbstractEventLoop,
    pool: ThreadPoolExecutor,
    call: Callable[[], Any],
    tracker: native.StateTracker | None,
    state: State,
) -> Any:
    """``call`` (a channel's blocking get or put) in the executor, the task marked ``state``."""
    prev = tracker.set(state) if tracker is not None else 0
    try:
        return await loop.run_in_executor(pool, call)
    finally:
        if tracker is not None:
            tracker.set(prev)


class _Ends:
    """One task's channel calls: at once when they need not wait, else awaited."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: ThreadPoolExecutor,
        tracker: native.StateTracker | None,
    ) -> None:
        self.loop, self.pool, self.tracker = loop, pool, tracker

    async def get(self, ch: Channel) -> Any:
        nowait = getattr(ch, "get_nowait", None)
        if nowait is not None:
            try:
                item = nowait()
            except queue.Empty:
                pass
            else:
                if self.tracker is not None:
                    self.tracker.heartbeat()
                return item
        return await _wait(self.loop, self.pool, ch.get, self.tracker, State.BLOCKED_IN)

    async def put(self, ch: Channel, item: Any) -> None:
        nowait = getattr(ch, "put_nowait", None)
        if nowait is not None:
            try:
                nowait(item)
            except queue.Full:
                pass
            else:
                if self.tracker is not None:
                    self.tracker.heartbeat()
                return
        await _wait(self.loop, self.pool, lambda: ch.put(item), self.tracker, State.BLOCKED_OUT)


async def _inputs(ends: _Ends, fanin: str, ins: list[Channel]) -> AsyncIterator[Any]:
    """Input items until every input has ended (as ``worker._inputs``)."""
    active = list(ins)
    if fanin == "zip" and len(ins) > 1:
        while active:
            batch = []
            for ch in list(active):
                item = await ends.get(ch)
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
        item = await ends.get(ch)
        if item is EOS:
            active.remove(ch)
            continue
        i += 1
        yield item


async def _outputs(result: Any) -> AsyncIterator[Any]:
    """What one call of a stage's code gives: awaited if a coroutine; an async generator's or a
    generator's yields; else the value unless it is None."""
    if inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result):
        async for out in result:
            yield out
    elif inspect.isgenerator(result):
        for out in result:
            yield out
    elif result is not None:
        yield result


def _emitter(spec: Any, ends: _Ends, outs: list[Channel]) -> Callable[[Any], Awaitable[None]]:
    """How a task puts each of its outputs: round-robin over ``outs``, or to each of them."""
    turn = [0]

    async def emit(item: Any) -> None:
        if not outs:
            return
        if spec.fanout == "broadcast":
            for ch in outs:
                await ends.put(ch, item)
            return
        i = turn[0]
        await ends.put(outs[i], item)
        turn[0] = (i + 1) % len(outs)

    return emit


async def _generate(fn: Callable[[], Any], emit: Callable[[Any], Awaitable[None]]) -> None:
    """A source's items, emitted: those of what ``fn`` returns (awaited if a coroutine), an
    async generator, a generator or an iterable."""
    made = fn()
    if inspect.isawaitable(made):
        made = await made
    if inspect.isasyncgen(made):
        async for item in made:
            await emit(item)
    elif made is not None:
        for item in made:
            await emit(item)


async def run_task(
    spec: Any,
    ins: list[Channel],
    outs: list[Channel],
    probes: StageProbes,
    pool: ThreadPoolExecutor,
    on_error: Callable[[str, BaseException], None],
) -> None:
    """One stage as a task of the loop. Errors go to ``on_error``; nothing escapes."""
    tracker = probes.tracker
    ends = _Ends(asyncio.get_running_loop(), pool, tracker)
    emit = _emitter(spec, ends, outs)
    try:
        body = StageBody(spec.name, spec.obj)
        if tracker is not None:
            tracker.set(State.BUSY)
        body.setup()
        fn = body.fn
        if not ins:
            await _generate(fn, emit)
        else:
            async for item in _inputs(ends, spec.fanin, ins):
                async for out in _outputs(fn(item)):
                    await emit(out)
        body.teardown()
        if probes.settle is not None:
            probes.settle()
        for ch in outs:
            await ends.put(ch, EOS)
        if tracker is not None:
            tracker.set(State.IDLE)
    except Aborted:
        if tracker is not None:
            tracker.set(State.IDLE)
    except BaseException as exc:
        if probes.settle is not None:
            probes.settle()
        on_error(spec.name, exc)


def _measure_lag(first: str) -> None:
    """The loop's lag: now and then, how late the loop runs a callback that is due (the timer
    ``FIRST.loop_lag``, when a query uses it; host ns, as every asyncio resource's clock)."""
    timer = user_probe(f"{first}.{LOOP_LAG}") if first else None
    if timer is None or not timer.active:
        return
    LagSampler(asyncio.get_running_loop(), timer.lapse)


def start_loop(
    name: str,
    tasks: list[tuple[Any, list[Channel], list[Channel], StageProbes]],
    on_error: Callable[[str, BaseException], None],
) -> threading.Thread:
    """The resource ``name``'s event loop in a thread of its own, running every stage placed
    on it until each has ended; a waiting channel call takes one executor thread."""

    first = tasks[0][0].name if tasks else ""

    async def main() -> None:
        _measure_lag(first)
        with ThreadPoolExecutor(
            max_workers=max(2 * len(tasks), 2), thread_name_prefix=f"streamscope-{name}"
        ) as pool:
            await asyncio.gather(
                *(run_task(spec, ins, outs, probes, pool, on_error)
                  for spec, ins, outs, probes in tasks)
            )  # fmt: skip

    t = threading.Thread(target=asyncio.run, args=(main(),), name=f"loop-{name}", daemon=True)
    t.start()
    return t


__all__ = ["run_task", "start_loop"]
