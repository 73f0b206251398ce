"""The session's claim table: stage and channel names, agreed on by every process of a program.

In: a worker (``naming.Who``) at its first queue operation, or a queue whose two ends are known.
Out: the stage's or the channel's name, claimed the first time in the session by any of the
program's processes (a file of lines in the ring directory, appended under a file lock:
``claimlog``), so that a pool's processes agree on their stage and no two stages or channels
share a name.
The lock this process takes around it is free again in a forked child (``core.forksafe``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

from streamscope.core import forksafe
from streamscope.pipeline.program.auto.claimlog import ClaimTable, forget, locked
from streamscope.pipeline.program.auto.naming import MAIN_THREAD, PLACE, Who
from streamscope.pipeline.program.registry import REGISTRY

#: This process's claims so far: key -> (name, how); and its lock (threads claim at once).
_claimed: dict[str, tuple[str, str]] = {}
_claim_lock = forksafe.lock()
#: This process's threads at work in each stage, and the stages all of whose threads here
#: ended, by what their workers were (code, the places they were handed queues in): the next
#: thread of that code handed queues in those places takes the stage up (a program starting a
#: producer and a consumer per queue, one pair after another, has two stages, not two per
#: queue). Process-wide, like the claims.
_live: dict[str, int] = {}
_vacant: dict[tuple[str, tuple[str, ...]], list[str]] = {}
#: What each vacant stage waits for (its key in ``_vacant``), process-wide with it.
_vacant_for: dict[str, tuple[str, tuple[str, ...]]] = {}


#: Per base name, the number from which this process looks for a free ``base #N`` (the names
#: below it are taken: a claim costs the same whatever the number of names before it).
_next_number: dict[str, int] = {}


def _new_name(table: ClaimTable, fd: int, base: str, how: str) -> tuple[str, str]:
    """A name nobody has yet: ``base``, else ``base #N`` (then said to be named by place)."""
    n = _next_number.get(base, 1)
    name = base if n == 1 else f"{base} #{n}"
    while not table.take(fd, name):
        n += 1
        name = f"{base} #{n}"
    _next_number[base] = n + 1
    return name, how if n == 1 else PLACE


def claim(keys: str | Sequence[str], base: str, how: str) -> tuple[str, str]:
    """The name of whatever ``keys`` stand for (a stage, a channel), claimed the first time in
    the session by any of the program's processes: the name of the first key that has one
    (every other key then gets it too), else ``base``, or ``base #N`` when another has that
    already (``how`` then ``place``). Without a session: ``base``.

    The table (``claimlog``) holds one line per key given a name and one per name taken; a
    claim costs a lock and an append, however many there were before.
    """
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    directory = REGISTRY.directory if REGISTRY.active() else None
    if directory is None:
        return base, how
    with _claim_lock:
        got = _claimed.get(keys[0])
        if got is not None:
            return got
        with locked(directory) as (table, fd):
            found = next((table.values[k] for k in keys if k in table.values), None)
            name, how = tuple(found) if found is not None else _new_name(table, fd, base, how)
            for k in keys:
                if k not in table.values:
                    table.put(fd, k, [name, how])
        for k in keys:
            _claimed[k] = (name, how)
        return name, how


def same_stage(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> bool:
    """Whether two workers of one code, handed the queues ``a`` and ``b`` (their places and
    ids), are one stage: they share a queue in the same place (a pool's input, a loader's
    one result queue), and no queue of one is in another place in the other (one's output is
    not the other's input, as along a pipeline of one worker function)."""
    at_a = {q: p for p, q in a}
    at_b = {q: p for p, q in b}
    shared = [q for q in at_a if q in at_b]
    return any(at_a[q] == at_b[q] for q in shared) and all(at_a[q] == at_b[q] for q in shared)


def _claim_by_slots(who: Who, key: str) -> tuple[str, str]:
    """``claim`` for a worker handed queues (``who.slots``): the stage of an earlier worker of
    the same code that is ``same_stage`` with it, else a new one; ``key`` (its first
    operation's) names it too. The stages that may be it are those an earlier worker of the
    same code was handed one of these queues for (a list per queue and code): a claim costs
    the same however many stages the code has."""
    directory = REGISTRY.directory if REGISTRY.active() else None
    if directory is None:
        return who.base, who.how
    with _claim_lock:
        got = _claimed.get(key)
        if got is not None:
            return got
        with locked(directory) as (table, fd):
            hit = None
            for _, queue in who.slots:
                for cand in table.lists.get(f"{who.ident}|{queue}", ()):
                    if same_stage(cand[2], who.slots):
                        hit = cand
                        break
                if hit is not None:
                    break
            if hit is None:
                post = _post(who)
                vacant = _vacant.get(post)
                if vacant:  # a stage of this code whose threads here all ended: taken up
                    name = vacant.pop()
                    _vacant_for.pop(name, None)
                    if not vacant:
                        del _vacant[post]
                    named = (name, _how[name])
                else:
                    named = _new_name(table, fd, who.base, who.how)
                hit = [*named, [list(x) for x in who.slots]]
                for _, queue in who.slots:
                    table.add(fd, f"{who.ident}|{queue}", hit)
            name, how = hit[0], hit[1]
            _how.setdefault(name, how)
            if key not in table.values:
                table.put(fd, key, [name, how])
        _claimed[key] = (name, how)
        return name, how


def _post(who: Who) -> tuple[str, tuple[str, ...]]:
    """What a thread's stage is vacated for: its code and the places it was handed queues in."""
    return who.ident, tuple(sorted(place for place, _ in who.slots))


#: How each stage claimed by slots in this process was named (a stage taken up keeps it).
_how: dict[str, str] = {}


def occupy(name: str) -> None:
    """A thread of this process works in stage ``name`` from now on."""
    with _claim_lock:
        _live[name] = _live.get(name, 0) + 1
        post = _vacant_for.pop(name, None)
        if post is not None and name in _vacant.get(post, ()):
            names = _vacant[post]
            names.remove(name)
            if not names:
                del _vacant[post]


def vacate(who: Who, name: str) -> None:
    """A thread of stage ``name``, started as ``who``, ended: when it was the stage's last here
    and it was handed queues, the stage waits for the next thread of its code (``occupy``)."""
    with _claim_lock:
        left = _live.get(name, 0) - 1
        if left > 0:
            _live[name] = left
            return
        _live.pop(name, None)
        if who.slots and name in _how:
            post = _post(who)
            _vacant.setdefault(post, []).append(name)
            _vacant_for[name] = post


def forget_claims() -> None:
    """The session ended: names are claimed anew in the next."""
    with _claim_lock:
        _claimed.clear()
        _next_number.clear()
        _live.clear()
        _vacant.clear()
        _vacant_for.clear()
        _how.clear()
        forget()


def claim_stage(who: Who, end: str, queue: str) -> str:
    """The stage of a worker started as ``who`` whose first operation is at ``end`` (``in``:
    it takes; ``out``: it puts) of the queue ``queue`` (its id in the session), named and
    recorded for the run (``REGISTRY.named_by``)."""
    key = f"stage|{who.ident}|{end}|{queue}"
    if who.how == MAIN_THREAD:
        name, how = claim("stage|main", who.base, who.how)
    elif who.slots:
        name, how = _claim_by_slots(who, key)
    else:
        name, how = claim(key, who.base, who.how)
    if REGISTRY.active():
        REGISTRY.named_by.setdefault(name, how)
    return name


#: Serial numbers of the queues this process makes (a queue's id is ``pid.serial``).
_queue_serial = itertools.count(1)


def new_queue_id() -> str:
    """An id for a queue made now, unique among the session's processes."""
    return f"{os.getpid()}.{next(_queue_serial)}"


def claim_channel(queue: str, src: str, dst: str) -> str:
    """The name of the channel a queue is from ``src`` to ``dst``: ``src -> dst``, numbered
    when another queue has the same ends."""
    name, _ = claim(f"channel|{queue}", f"{src} -> {dst}", "")
    return name


__all__ = [
    "claim",
    "claim_channel",
    "claim_stage",
    "forget_claims",
    "new_queue_id",
    "occupy",
    "same_stage",
    "vacate",
]
