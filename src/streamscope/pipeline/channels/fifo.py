"""Channels between stages in one process: the native bounded FIFO with its tap hooks.

In: items from a producer stage. Out: the same items, in order, at the consumer; and, when a
query needs it, one tail record per insertion and one head record per removal, written by the
FIFO itself inside its own lock (``core.native.Fifo``). A stage thread's state tracker, bound to
the thread, marks it blocked only while it really waits.
"""

from __future__ import annotations

from streamscope.core import native
from streamscope.core.stream import EOS, Aborted, EndOfStream

__all__ = ["EOS", "Aborted", "EndOfStream", "ThreadChannel"]


class ThreadChannel(native.Fifo):
    """A bounded FIFO between threads: ``put``/``get`` as ``queue.Queue``'s, waiting without
    the interpreter lock. ``tail``/``head`` take a ``core.native.Ring`` (or None): each
    insertion records its 1-based sequence number there, each removal its own. The end-of-stream
    marker is not an item: it is neither counted nor recorded."""

    def __init__(self, maxsize: int = 0, *, name: str = "") -> None:
        super().__init__(maxsize)
        self.name = name
