"""The instrumented standard queues behave as the standard ones (no session needed), and
streamscope's and the standard library's own queues are left as they are."""

from __future__ import annotations

import functools
import multiprocessing as mp
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamscope.cli.apploader import is_app
from streamscope.pipeline import auto


@pytest.fixture
def installed() -> Iterator[None]:
    auto.install()
    try:
        yield
    finally:
        auto.uninstall()


def test_install_replaces_and_uninstall_restores_the_standard_queues() -> None:
    plain_q, plain_sq, plain_mp = queue.Queue, queue.SimpleQueue, mp.Queue
    auto.install()
    try:
        assert queue.Queue is auto.AutoQueue and queue.SimpleQueue is auto.AutoSimpleQueue
        assert isinstance(mp.Queue(2), auto.AutoMPQueue)
        assert isinstance(mp.get_context("spawn").JoinableQueue(), auto.AutoMPQueue)
    finally:
        auto.uninstall()
    assert (queue.Queue, queue.SimpleQueue) == (plain_q, plain_sq)
    assert mp.Queue == plain_mp and not isinstance(mp.Queue(), auto.AutoMPQueue)


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

    class Reader(threading.Thread):
        def run(self) -> None: ...

    assert auto.thread_stage(threading.Thread(target=_work)) == "_work"
    assert auto.thread_stage(Reader()) == "test_stages_are_named_after_their_targets.Reader"
    assert auto.thread_stage(threading.Thread()) is None
    assert auto.thread_stage(threading.Timer(1, _work)) is None  # the library's own


@pytest.mark.parametrize(
    ("source", "app"),
    [
        ("def pipeline(argv):\n    pass\n", True),
        ("pipeline = make()\n", True),
        ("pipeline: object = make()\n", True),
        ("from builder import pipeline\n", True),
        ("QUERIES = ['state(a)']\n", True),  # an app whose pipeline is missing: said so
        ("import queue\nq = queue.Queue()\nif __name__ == '__main__':\n    pipeline = 1\n", False),
        ("def main():\n    pipeline = 1\n", False),
    ],
)
def test_a_file_is_an_app_only_if_it_is_app_at_its_top(
    tmp_path: Path, source: str, app: bool
) -> None:
    path = tmp_path / "prog.py"
    path.write_text(source)
    assert is_app(path) is app
