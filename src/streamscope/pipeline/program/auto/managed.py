"""A ``multiprocessing`` manager's queues (``Manager().Queue()``) as a program run as it is
uses them, recorded.

In: the calls the program's processes make on a manager's ``Queue`` or ``JoinableQueue``
proxies (``put``, ``get``, their ``_nowait`` forms, ``join``), patched once the program imports
``multiprocessing.managers`` (``auto.polling``). Out: one tail record per insertion and one head
record per removal, numbered in a shared block (``auto.mpqueue.Counts``) that every process
finds by the queue's token (the manager's address and the queue's id there: a proxy passes to
another process as its token), the calling workers blocked in while a get waits and blocked out
while ``join`` does, and the stages at its ends found in whichever processes put and get.

The queue itself lives in the manager's process, where no stage of the program runs: its ends
are counted where the calls are made, an insertion as its put is sent (before its item can be
taken), a removal once its get came back. A put the manager refuses (``queue.Full`` from a
bounded queue's ``put_nowait``) is counted all the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.program.auto.mpcounts import Counts
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.waits import waiting
from streamscope.pipeline.program.registry import REGISTRY

#: The manager types that are queues.
QUEUES = ("Queue", "JoinableQueue")
_PUTS = ("put", "put_nowait")
_GETS = ("get", "get_nowait")

#: Each managed queue's counts in this process, by its token (None: no session); process-wide,
#: as the proxies are.
_counts: dict[tuple[str, str], Counts | None] = {}


def counts_of_token(token: Any) -> Counts | None:
    """The counts of the manager's queue ``token`` stands for, the same in every process."""
    key = (repr(token.address), str(token.id))
    if key not in _counts:
        if not REGISTRY.active():
            return None
        # a name every process derives alike (``hash`` is salted per process)
        name = "m" + hashlib.sha1("|".join(key).encode()).hexdigest()[:20]  # noqa: S324
        _counts[key] = Counts(0, name)
    return _counts[key]


def _callmethod(call: Callable[..., Any]) -> Callable[..., Any]:
    """``BaseProxy._callmethod``: a queue proxy's puts and gets counted at the calling
    worker's end."""

    def callmethod(self: Any, methodname: str, args: Any = (), kwds: Any = None) -> Any:
        kwds = {} if kwds is None else kwds
        token = self._token
        if token.typeid not in QUEUES or methodname not in (*_PUTS, *_GETS, "join"):
            return call(self, methodname, args, kwds)
        counts = counts_of_token(token)
        if counts is None:
            return call(self, methodname, args, kwds)
        if methodname == "join":  # its puts worked off downstream: blocked out meanwhile
            with waiting(State.BLOCKED_OUT):
                return call(self, methodname, args, kwds)
        if methodname in _PUTS:
            tracker = counts.enter("tail")
            counts.inserted()
            got = call(self, methodname, args, kwds)
            if tracker is not None:
                tracker.gave()
            return got
        tracker = counts.enter("head")
        block = methodname == "get" and (args[0] if args else kwds.get("block", True))
        with waiting(State.BLOCKED_IN) if tracker is not None and block else nullcontext():
            got = call(self, methodname, args, kwds)
        counts.removed()
        if tracker is not None:
            tracker.took()
        return got

    return callmethod


def patches(module: Any) -> Patches:
    """``multiprocessing.managers``: its proxies' calls, recorded while installed."""
    return Patches({(module.BaseProxy, "_callmethod"): _callmethod})


__all__ = ["QUEUES", "counts_of_token", "patches"]
