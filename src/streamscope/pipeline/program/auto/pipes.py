"""``multiprocessing.Pipe()`` as a program run as it is uses it: each direction a channel.

In: the pipes the program makes (``multiprocessing.Pipe``, not those ``multiprocessing`` makes
for its own queues, pools and executors), and the calls on their ends (``send``,
``send_bytes``; ``recv``, ``recv_bytes``, ``recv_bytes_into``) in whichever processes hold them,
patched once the program imports ``multiprocessing.connection`` (``auto.polling``). Out: per
direction, one tail record per message sent and one head record per message received, numbered
in a shared block (``auto.mpqueue.Counts``) that both ends carry, the receiving worker blocked in
while nothing has come yet, and the stages at its two ends found where they send and receive.

A message is counted in as it is sent (before it can be received) and out once it has been
received. The ends carry their counts to processes the program forks (the start method of
``multiprocessing`` on Linux); a process started otherwise gets its end without them, and that
direction is then not seen.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext
from types import FrameType
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.program.auto.mpcounts import Counts
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.stages import in_own_thread, internal
from streamscope.pipeline.program.auto.waits import waiting
from streamscope.pipeline.program.registry import REGISTRY

#: What a pipe's end sends through, and receives through.
_SENDS = ("send", "send_bytes")
_RECEIVES = ("recv", "recv_bytes", "recv_bytes_into")


def _programs() -> bool:
    """Whether the code that made a pipe (past ``multiprocessing.Pipe`` and this package) is
    the program's: ``multiprocessing``'s own pipes, inside its queues and pools, are not."""
    if in_own_thread():
        return False
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != "multiprocessing.context" and not name.startswith(
            "streamscope.pipeline.program.auto"
        ):
            return not internal(name)
        frame = frame.f_back
    return False


def _pipe(make: Callable[..., Any]) -> Callable[..., Any]:
    """``multiprocessing.connection.Pipe``: a pipe of the program's gets counts per direction
    (``_ss_out`` on the end that sends it, ``_ss_in`` on the end that receives it)."""

    def pipe(duplex: bool = True) -> Any:
        a, b = make(duplex)
        if REGISTRY.active() and _programs():
            b._ss_out = a._ss_in = Counts(0)  # (one way: ``a`` only receives, ``b`` only sends)
            if duplex:
                a._ss_out = b._ss_in = Counts(0)
        return a, b

    return pipe


def _sending(send: Callable[..., Any]) -> Callable[..., Any]:
    def sending(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts: Counts | None = self.__dict__.get("_ss_out")
        if counts is None:
            return send(self, *args, **kwargs)
        tracker = counts.enter("tail")
        counts.inserted()
        got = send(self, *args, **kwargs)
        if tracker is not None:
            tracker.gave()
        return got

    return sending


def _receiving(recv: Callable[..., Any]) -> Callable[..., Any]:
    def receiving(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts: Counts | None = self.__dict__.get("_ss_in")
        if counts is None:
            return recv(self, *args, **kwargs)
        tracker = counts.enter("head")
        waits = tracker is not None and not self.poll()
        with waiting(State.BLOCKED_IN) if waits else nullcontext():
            got = recv(self, *args, **kwargs)
        counts.removed()
        if tracker is not None:
            tracker.took()
        return got

    return receiving


def patches(module: Any) -> Patches:
    """``multiprocessing.connection``: its ``Pipe`` and its connections' sends and receives,
    recorded while installed."""
    base = module._ConnectionBase
    return Patches({
        (module, "Pipe"): _pipe,
        **{(base, name): _sending for name in _SENDS},
        **{(base, name): _receiving for name in _RECEIVES},
    })  # fmt: skip


__all__ = ["patches"]
