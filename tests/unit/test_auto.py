"""The instrumented standard queues behave as the standard ones (no session needed), and
streamscope's and the standard library's own queues are left as they are."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures.process as cfp
import functools
import inspect
import json
import multiprocessing as mp
import multiprocessing.queues as mpq
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from joblib.externals.loky.backend.queues import SimpleQueue as LokySimpleQueue
from joblib.externals.loky.process_executor import ProcessPoolExecutor as LokyExecutor

from streamscope.cli.apploader import is_app
from streamscope.pipeline.program import auto
from streamscope.pipeline.program.auto import claims, naming
from streamscope.pipeline.program.registry import REGISTRY


@pytest.fixture
def installed() -> Iterator[None]:
    auto.install()
    try:
        yield
    finally:
        auto.uninstall()


def test_install_replaces_and_uninstall_restores_the_standard_queues() -> None:
    plain_q, plain_sq, plain_mp = queue.Queue, queue.SimpleQueue, mp.Queue
    plain_exit, plain_wait = asyncio.TaskGroup.__aexit__, asyncio.wait
    gathering = asyncio.tasks._GatheringFuture  # type: ignore[attr-defined]
    assert "__await__" not in vars(gathering)  # inherited from asyncio.Future
    loky_put, loky_submit = LokySimpleQueue.put, LokyExecutor.submit
    cf_submit = cfp.ProcessPoolExecutor.submit
    auto.install()
    try:
        # loky's modules, imported already, patched (those imported later as they are); the
        # standard process executor's likewise (a program run as it is imports it later:
        # ``test_program_pools``)
        assert LokySimpleQueue.put is not loky_put and LokyExecutor.submit is not loky_submit
        assert cfp.ProcessPoolExecutor.submit is not cf_submit
        assert asyncio.TaskGroup.__aexit__ is not plain_exit and asyncio.wait is not plain_wait
        assert "__await__" in vars(gathering)
        assert queue.Queue is auto.AutoQueue and queue.SimpleQueue is auto.AutoSimpleQueue
        assert auto.counts_of(mp.Queue(2)) is not None
        assert auto.counts_of(mp.get_context("spawn").JoinableQueue()) is not None
        assert auto.counts_of(mp.SimpleQueue()) is not None
        assert auto.counts_of(mpq.Queue(ctx=mp.get_context())) is not None  # made directly
        # the standard classes keep their identity: their instances pickle by reference
        assert type(mp.Queue()) is mpq.Queue
    finally:
        auto.uninstall()
    assert (queue.Queue, queue.SimpleQueue) == (plain_q, plain_sq)
    assert mp.Queue == plain_mp and auto.counts_of(mp.Queue()) is None
    assert (asyncio.TaskGroup.__aexit__, asyncio.wait) == (plain_exit, plain_wait)
    assert "__await__" not in vars(gathering) and "__iter__" not in vars(gathering)
    assert (LokySimpleQueue.put, LokyExecutor.submit) == (loky_put, loky_submit)
    assert cfp.ProcessPoolExecutor.submit is cf_submit


def test_an_instrumented_queue_keeps_the_standard_behaviour(installed: None) -> None:
    q = queue.Queue(2)
    assert isinstance(q, auto.AutoQueue)
    q.put(1)
    q.put_nowait(2)
    assert q.full() and q.qsize() == 2
    with pytest.raises(queue.Full):
        q.put(3, block=False)
    with pytest.raises(queue.Full):
        q.put(3, timeout=0.01)
    with pytest.raises(ValueError, match="non-negative"):
        q.put(3, timeout=-1)
    assert [q.get(), q.get_nowait()] == [1, 2]
    with pytest.raises(queue.Empty):
        q.get(block=False)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    # task_done/join as queue.Queue's
    q.task_done()
    q.task_done()
    q.put("x")
    done = threading.Event()
    threading.Thread(target=lambda: (q.join(), done.set())).start()
    assert not done.wait(0.05)
    q.get()
    q.task_done()
    assert done.wait(5)
    with pytest.raises(ValueError, match="too many times"):
        q.task_done()


def test_a_blocked_put_and_get_wait_for_each_other(installed: None) -> None:
    q = queue.Queue(1)
    got: list[int] = []
    t = threading.Thread(target=lambda: got.extend(q.get() for _ in range(50)))
    t.start()
    for i in range(50):
        q.put(i)
    t.join(10)
    assert got == list(range(50))


def test_a_programs_subclass_keeps_its_own_storage(installed: None) -> None:
    """A subclass of (what is now) queue.Queue that stores items its own way still does."""

    class Lifo(queue.Queue):  # type: ignore[type-arg]
        def _init(self, maxsize: int) -> None:
            self.queue = []  # type: ignore[assignment]

        def _put(self, item: object) -> None:
            self.queue.append(item)

        def _get(self) -> object:
            return self.queue.pop()

    q = Lifo()
    for i in range(3):
        q.put(i)
    assert [q.get() for _ in range(3)] == [2, 1, 0]
    assert isinstance(queue.PriorityQueue(), queue.PriorityQueue)  # unchanged classes stay


def test_a_queues_own_steps_run_in_the_standard_librarys_frames(installed: None) -> None:
    """A program's put and get run the standard ``Queue.put`` and ``Queue.get`` (their frames
    in queue.py and threading.py), with streamscope's steps inside them: the stacks sampled
    show the queue's own work as the program's and only what is added as streamscope's (a
    copy of the standard steps in streamscope's frames made a program of 2,000 threads report
    44 % of its time as monitoring where 20-25 % was)."""
    import sys

    q = queue.Queue(4)
    q.put(0)
    q.get()  # the thread's first put and get: its naming done
    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            calls.append((Path(frame.f_code.co_filename).name, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        q.put(1)
        q.get()
    finally:
        sys.setprofile(None)
    assert ("queue.py", "put") in calls and ("queue.py", "get") in calls
    put, get = calls.index(("queue.py", "put")), calls.index(("queue.py", "get"))
    assert calls[put:get].count(("queue.py", "_put")) == 1  # the standard storage's step
    assert calls[put:get].count(("queues.py", "notify")) == 1  # the record, where it notifies
    assert calls[get:].count(("queue.py", "_get")) == 1
    assert calls[get:].count(("queues.py", "notify")) == 1
    assert ("threading.py", "__enter__") in calls  # the queue's lock, by its condition
    # a program that gives its queue new storage: what it holds stays the queue's
    q.queue = type(q.queue)([5])  # type: ignore[assignment]
    q.put(6)
    assert [q.get(), q.get()] == [5, 6] and q.empty()


def test_lifo_and_priority_queues_are_watched_and_keep_their_order(installed: None) -> None:
    lifo, prio = queue.LifoQueue(), queue.PriorityQueue()
    assert isinstance(lifo, auto.AutoQueue) and isinstance(prio, auto.AutoQueue)
    for i in (2, 3, 1):
        lifo.put(i)
        prio.put(i)
    assert [lifo.get() for _ in range(3)] == [1, 3, 2]
    assert [prio.get() for _ in range(3)] == [1, 2, 3]

    async def both() -> list[int]:
        aq = asyncio.PriorityQueue()
        assert type(aq).__name__ == "AutoAsyncPriorityQueue"
        for i in (2, 3, 1):
            aq.put_nowait(i)
        return [aq.get_nowait() for _ in range(3)]

    assert asyncio.run(both()) == [1, 2, 3]


def test_an_instrumented_simple_queue(installed: None) -> None:
    q = queue.SimpleQueue()
    assert isinstance(q, auto.AutoSimpleQueue)
    q.put(1)
    q.put_nowait(2)
    assert (q.get(), q.get_nowait(), q.empty()) == (1, 2, True)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)


def test_streamscopes_and_the_standard_librarys_own_queues_are_left_alone(
    installed: None,
) -> None:
    made: dict[str, object] = {}
    code = "import queue\nq = queue.Queue(3)\ns = queue.SimpleQueue()\n"
    for module in ("streamscope.fake", "concurrent.futures.process", "logging.handlers"):
        scope: dict[str, object] = {"__name__": module}
        exec(code, scope)
        made[module] = scope
        assert type(scope["q"]) is auto.StandardQueue
        assert type(scope["s"]) is auto.StandardSimpleQueue
        scope["q"].put(1)  # type: ignore[attr-defined]
        assert scope["q"].get() == 1  # type: ignore[attr-defined]
    program: dict[str, object] = {"__name__": "__main__"}
    exec(code, program)
    assert type(program["q"]) is auto.AutoQueue


def _work() -> None: ...


class _Worker:
    def run(self) -> None: ...


def test_stages_are_named_after_their_targets() -> None:
    def inner() -> None: ...

    assert auto.callable_name(_work) == "_work"
    assert auto.callable_name(functools.partial(functools.partial(_work))) == "_work"
    assert auto.callable_name(_Worker().run) == "_Worker.run"
    assert auto.callable_name(inner) == "test_stages_are_named_after_their_targets.inner"
    anonymous = lambda: 0  # noqa: E731
    line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    assert (
        auto.callable_name(anonymous)
        == f"test_stages_are_named_after_their_targets.<lambda>:{line}"
    )

    class Reader(threading.Thread):
        def run(self) -> None: ...

    who = auto.thread_who(threading.Thread(target=_work))
    assert who is not None and (who.base, who.how) == ("_work", "function")
    who = auto.thread_who(Reader())
    assert who is not None
    assert (who.base, who.how) == ("test_stages_are_named_after_their_targets.Reader", "function")
    assert auto.thread_who(threading.Thread()) is None
    assert auto.thread_who(threading.Timer(1, _work)) is None  # the library's own


def _resize(x: int) -> int:
    return x


def _other(x: int) -> int:
    return x


def _generic(fn: object, q_in: object, q_out: object) -> None: ...


def test_a_worker_is_named_by_the_name_it_was_given_without_its_number() -> None:
    who = naming.who_of_thread(threading.Thread(target=_generic, name="resize-2"))
    assert (who.base, who.how) == ("resize", "given")
    who = naming.who_of_thread(threading.Thread(target=_generic, name="io_0"))
    assert (who.base, who.how) == ("io", "given")
    who = naming.who_of_thread(threading.Thread(target=_generic, name="stage2"))
    assert (who.base, who.how) == ("stage2", "given")
    # the names the library makes up are no names
    who = naming.who_of_thread(threading.Thread(target=_generic))
    assert who.how == "function" and who.base == "_generic"
    assert naming.who_of_task("Task-12", _resize.__code__).how == "function"
    assert naming.who_of_task("fetcher-3", _resize.__code__).base == "fetcher"


def test_a_shared_worker_function_is_named_by_the_function_it_is_given() -> None:
    """``Thread(target=worker, args=(resize, q_in, q_out))``: the stage is ``resize``; the
    same target with another function is another stage."""
    a = naming.who_of_thread(threading.Thread(target=_generic, args=(_resize, 1, 2)))
    b = naming.who_of_thread(threading.Thread(target=_generic, args=(_other, 2, 3)))
    assert (a.base, a.how, b.base) == ("_resize", "function", "_other")
    assert a.ident != b.ident
    # a library's callable carrying the program's function: a partial, a closure, an object
    assert (
        naming.function_name(naming.found_function(functools.partial(_resize, 1), (), {}))
        == "_resize"
    )
    carrier = argparse.Namespace(on_start=_other, process=argparse.Namespace(f=_resize))
    assert naming.found_function(carrier, (), {}) is _resize  # hooks (on_*) left out
    assert naming.found_function(json.dumps, (1, "x"), {}) is None
    who = naming.who_started(json.dumps, (), {}, None, True)
    assert (who.base, who.how) == ("dumps", "target")


def test_names_are_claimed_once_across_the_programs_processes(tmp_path: Path) -> None:
    """Two stages that would have the same name get ``x`` and ``x #2``; the same key gets the
    same name in every process (a pool's workers agree), and two queues with the same ends
    are two channels."""
    REGISTRY.activate((), str(tmp_path), 1024, [])
    try:
        who = naming.Who("worker", "function", "prog.py:1:worker")
        first = claims.claim_stage(who, "in", "1.1")
        again = claims.claim_stage(who, "in", "1.1")
        other = claims.claim_stage(who, "in", "1.2")
        assert (first, again, other) == ("worker", "worker", "worker #2")
        assert REGISTRY.named_by == {"worker": "function", "worker #2": "place"}
        ctx = mp.get_context("fork")
        with ctx.Pool(1) as pool:
            claims.forget_claims()  # what another process knows is only what the table says
            there = pool.apply(claims.claim_stage, (who, "in", "1.2"))
            third = pool.apply(claims.claim_stage, (who, "out", "1.3"))
        assert (there, third) == ("worker #2", "worker #3")
        assert claims.claim_channel("1.1", "a", "b") == "a -> b"
        assert claims.claim_channel("1.2", "a", "b") == "a -> b #2"
        # workers of one code handed the same queue in the same place are one stage, whatever
        # queue each takes from first (a loader's workers, each fed by its own index queue)
        load = [
            naming.Who("load", "function", "p:9:load", (("1", f"i{n}"), ("2", "out")))
            for n in (1, 2)
        ]
        assert claims.claim_stage(load[0], "in", "i1") == claims.claim_stage(load[1], "in", "i2")
        # ... but not when handed it in another place (a shared worker function's pipeline)
        step = [
            naming.Who("step", "target", "p:5:step", (("1", a), ("2", b)))
            for a, b in (("s1", "s2"), ("s2", "s3"))
        ]
        assert claims.claim_stage(step[0], "in", "s1") == "step"
        assert claims.claim_stage(step[1], "in", "s2") == "step #2"
        # a queue every worker is handed (for errors, say) does not make a pipeline one stage
        assert not claims.same_stage(
            [("1", "s1"), ("2", "s2"), ("3", "log")], [("1", "s2"), ("2", "s3"), ("3", "log")]
        )
        assert claims.same_stage([("0", "a"), ("1", "b")], [("0", "a"), ("1", "b")])
    finally:
        claims.forget_claims()
        REGISTRY.deactivate()


@pytest.mark.parametrize(
    ("source", "app"),
    [
        ("import streamscope as ss\ndef pipeline(argv):\n    pass\n", True),
        ("from streamscope import Pipeline\npipeline = make()\n", True),
        ("import streamscope\npipeline: object = make()\n", True),
        ("from builder import pipeline\ndef f():\n    import streamscope.core\n", True),
        ("QUERIES = ['state(a)']\n", True),  # streamscope's own name; no pipeline: said so
        ("import queue\nq = queue.Queue()\nif __name__ == '__main__':\n    pipeline = 1\n", False),
        ("def main():\n    pipeline = 1\n", False),
        # a program's own helper of that name, in a file that never imports streamscope
        ("import queue\ndef pipeline(items, workers):\n    pass\n", False),
        ("from etl import pipeline\npipeline([1, 2])\n", False),
    ],
)
def test_a_file_is_an_app_only_if_it_is_app_at_its_top(
    tmp_path: Path, source: str, app: bool
) -> None:
    path = tmp_path / "prog.py"
    path.write_text(source)
    assert is_app(path) is app


class _Spawning:
    """What a process start is while it pickles its process object (``DupFd``: a descriptor
    passed on as it is)."""

    @staticmethod
    def DupFd(fd: int) -> int:
        return fd

    @staticmethod
    def duplicate_for_child(fd: int) -> int:
        return fd


def test_a_recorded_multiprocessing_queue_pickles_with_any_pickler(
    installed: None, tmp_path: Path
) -> None:
    """A program's ``multiprocessing`` queues, recorded in a session, pickle as they do plainly
    with ``multiprocessing``'s pickler and with cloudpickle (which joblib's loky starts its
    workers with), and a copy shares the original's counts."""
    from multiprocessing.context import set_spawning_popen
    from multiprocessing.reduction import ForkingPickler

    import cloudpickle

    REGISTRY.activate((), str(tmp_path), 1024, [])
    try:
        ctx = mp.get_context("spawn")
        queues = (ctx.Queue(4), ctx.JoinableQueue(), ctx.SimpleQueue())
        assert all(auto.counts_of(q) is not None for q in queues)
        set_spawning_popen(_Spawning())
        try:
            for q in queues:
                ForkingPickler.dumps(q)
                cloudpickle.dumps(q)
                counts = auto.counts_of(q)
                assert counts is not None
                there = cloudpickle.loads(cloudpickle.dumps(counts))
                counts.inserted()
                assert there.seq_in == counts.seq_in == 1
        finally:
            set_spawning_popen(None)
    finally:
        claims.forget_claims()
        REGISTRY.deactivate()


def test_installing_reads_what_naming_needs_of_the_interpreter_then() -> None:
    """The directories of the standard library and installed packages are read by the thread
    that installs the watching, not first by one of the program's threads: that read imports
    sysconfig's data, and a pool forked during an import in another thread can copy its lock
    held (its workers then wait on it forever)."""
    from streamscope.pipeline.program.auto import installer

    naming._library_roots.cache_clear()
    installer.install()
    try:
        assert naming._library_roots.cache_info().currsize == 1
    finally:
        installer.uninstall()
