"""``streamscope.Queue`` is a ``queue.Queue``: CPython's own ``test_queue`` (its ``QueueTest``,
the tests every FIFO queue must pass) runs against it, outside a session and inside one that
records every queue the tests make; and against the ``queue.Queue`` a program run as it is
gets (``AutoQueue``, whose put and get are the standard ones around its records).

The interpreter's ``test`` package is part of a standard CPython install; where a distribution
strips it, these tests say so and are skipped (CPython's own suite is the oracle here).
"""

from __future__ import annotations

import itertools
import queue
import types
import unittest
from typing import Any, ClassVar

import pytest

import streamscope as ss
from streamscope.core.modes import RunMode
from streamscope.pipeline.program.auto import AutoQueue
from streamscope.pipeline.program.dropin import REGISTRY
from streamscope.runtime.options import RunOptions

cpython = pytest.importorskip("test.test_queue", reason="this Python has no test package")

_serial = itertools.count(1)


class Queue(ss.Queue):
    """``ss.Queue`` made as the tests make ``queue.Queue`` (``Queue(maxsize)``): each its own
    channel between two stages of the tests."""

    def __init__(self, maxsize: int = 0) -> None:
        n = next(_serial)
        super().__init__(maxsize, src="test", dst="tested", name=f"conformance {n}")


#: What the tests read as ``self.queue``: the module under test.
SS_QUEUE = types.SimpleNamespace(Queue=Queue, Full=queue.Full, Empty=queue.Empty)


def test_the_queue_is_a_queue_queue() -> None:
    q = Queue(2)
    assert isinstance(q, queue.Queue) and q.maxsize == 2
    q.maxsize = 1
    assert q.maxsize == 1


class Program:
    class Queue(AutoQueue):
        """The ``queue.Queue`` of a program run as it is, as the tests make theirs (made in
        the standard library's code, the class would be the standard one)."""


class ProgramQueueTest(cpython.QueueTest, unittest.TestCase):  # type: ignore[misc,name-defined]
    """CPython's ``QueueTest`` against the program's ``queue.Queue``."""

    queue = types.SimpleNamespace(Queue=Program.Queue, Full=queue.Full, Empty=queue.Empty)


class SSQueueTest(cpython.QueueTest, unittest.TestCase):  # type: ignore[misc,name-defined]
    """CPython's ``QueueTest`` against ``ss.Queue``, no session."""

    queue = SS_QUEUE


class MonitoredSSQueueTest(cpython.QueueTest, unittest.TestCase):  # type: ignore[misc,name-defined]
    """The same inside a session whose default queries record every queue's two ends."""

    queue = SS_QUEUE
    _session: ClassVar[Any] = None

    @classmethod
    def setUpClass(cls) -> None:
        cls._session = ss.monitor([], RunOptions(mode=RunMode.INLINE))
        cls._session.__enter__()

    @classmethod
    def tearDownClass(cls) -> None:
        cls._session.__exit__(None, None, None)

    def setUp(self) -> None:
        super().setUp()
        assert REGISTRY.active()

    def tearDown(self) -> None:
        made = [q for q in REGISTRY.queues.values() if isinstance(q, Queue)]
        assert made and all(q.tail is not None for q in made[-1:]), "the queues are recorded"
        super().tearDown()
