"""The monitor's view of a run's rings: found in its ring directory as processes make them, and
drained every cycle.

In: ring files (``core.rings``) written by the application's processes. Out: per clock domain one
record array per drain (in raw ticks, each ring's records together), the refusals each probe
counted since the last drain, counter registers as COUNT records, and what recording cost, as
the rings sampled it while the run went on. The records of one drain are at most the rings'
capacity: the monitor's memory never grows with its backlog; a ring the monitor does not drain
in time refuses, and counts what it refuses. A ring found damaged (``RingReader.damage``,
``monitor.ringdamage``) loses what was wrong, and the run's notes say which ring and what
(``damage_notes``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamscope.core import native
from streamscope.core.errors import RunFileError
from streamscope.core.records import Kind, Records, make_records
from streamscope.core.rings import (
    DECLARED,
    SUFFIX,
    JournalReader,
    file_size,
    map_shared,
    parse_declaration,
)
from streamscope.core.slabs import SLAB_RINGS, slab_slot, slot_view
from streamscope.core.topology import HOST, Topology
from streamscope.monitor.ringdamage import DAMAGED, damage_text, sound
from streamscope.transport.ringreader import RingReader


@dataclass(slots=True)
class Drain:
    """One cycle's take from every ring (mutable while the cycle fills it, ring by ring)."""

    #: Records by clock domain, each ring's records together (so grouped by probe).
    records: dict[str, list[Records]] = field(default_factory=dict)
    #: Refusals noticed in this cycle: (probe, count).
    drops: list[tuple[int, int]] = field(default_factory=list)
    #: By probe, the value of the latest record it refused (a channel end's sequence number).
    refused: dict[int, int] = field(default_factory=dict)
    n_records: int = 0
    #: By domain, the ticks of the oldest record left in a ring this drain did not empty (the
    #: monitor is behind: nothing past it may be reduced yet).
    left: dict[str, int] = field(default_factory=dict)

    def by_domain(self) -> dict[str, Records]:
        return {
            d: np.concatenate(parts) if len(parts) > 1 else parts[0]
            for d, parts in self.records.items()
            if parts
        }


#: Virtual time (ns) of a domain's ticks; None while the domain cannot be placed in time.
ToNs = Callable[[str, int], "int | None"]


def _placer(to_ns: ToNs, domain: str) -> Callable[[int], int]:
    """``to_ns`` for one domain already placed in time."""
    return lambda ticks: to_ns(domain, ticks) or 0


@dataclass(slots=True)
class _Ring:
    """One mapped ring, its clock domain, and what was seen of it (mutable: it is read on)."""

    reader: RingReader
    domain: str
    last_total: int = 0
    gone: bool = False  # its writer's process ended, and that was reported
    index: int = -1  # its place in the ring set's order (``RingSet._astir``)


_PROC = os.path.isdir("/proc/self")


def alive(pid: int) -> bool:
    """The process exists and has not ended (an ended child its parent has not reaped yet,
    a zombie, has ended)."""
    if _PROC:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except FileNotFoundError:
            return False
        except OSError:
            return True
        end = stat.rfind(b")")
        return stat[end + 2 : end + 3] not in (b"Z", b"X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class RingCost:
    """What the rings of one probe sampled of their own cost: ``ns`` over ``n`` timed events
    (one in ``core.rings.SAMPLE_EVERY``), ``events`` written or refused, and how they are
    written (``probes.taps.COST_*``)."""

    ns: int
    n: int
    events: int
    cost_class: int


class RingSet:
    """Every ring of one run. ``drain`` takes what each holds; ``close`` unmaps them."""

    def __init__(
        self,
        directory: str,
        topology: Topology,
        on_declare: Callable[..., None] | None = None,
    ) -> None:
        self.directory = directory
        self._domain = {p.id: p.domain for p in topology.probes}
        self._rings: dict[str, _Ring] = {}
        self._turn = 0
        #: Rings that could not be opened: name -> why.
        self.bad: dict[str, str] = {}
        self._unread: dict[str, str] = {}  # of those, the ones whose contents were wrong
        self._on_declare = on_declare
        self._journal = JournalReader(directory)
        #: Rings closed by their writers and removed so far; probes of those since the last
        #: ``take_closed``.
        self.retired = 0
        self.closed: list[int] = []
        #: What the retired rings sampled of their cost, by probe: ns, n, events, cost class.
        self._spent: dict[int, list[int]] = {}
        #: The rings in a fixed order with their headers' addresses (the first ``len(order)``
        #: of ``_addrs``; a ring that goes leaves its place to the last), and where
        #: ``native.astir`` marks those that hold anything.
        self._order: list[_Ring] = []
        self._addrs = np.zeros(64, dtype=np.uint64)
        self._flags = np.zeros(64, dtype=np.uint8)
        #: The probes declared so far, sorted (None: to be made again from ``_domain``).
        self._known: np.ndarray | None = None
        #: Rings retired after they were found damaged: (name, probe, pid, damage).
        self._damaged: list[tuple[str, int, int, dict[str, int]]] = []
        #: Each slab file (``core.slabs``) mapped so far: its mapping, a slot's size, and how
        #: many of its slots were announced and retired (removed once all were both).
        self._slabs: dict[str, list[Any]] = {}

    def scan(self) -> int:
        """Open the rings made since the last scan (after reading the declarations of probes
        made during the run, which come before their rings); how
        many rings are open now. What is new is read from the run's journal: the work is
        what appeared, not what the directory holds."""
        found: list[Topology] = []
        rings: list[str] = []
        for line in self._journal.new_lines():
            what, _, name = line.partition(" ")
            if what == DECLARED:
                try:
                    decl = parse_declaration(name)
                except RunFileError as exc:
                    print(f"streamscope monitor: {exc}")
                    continue
                self._domain.update({p.id: p.domain for p in decl.probes})
                self._known = None
                found.append(decl)
            elif what == "R" and (name.endswith(SUFFIX) or slab_slot(name) is not None):
                rings.append(name)
        if self._on_declare is not None and found:
            self._on_declare(*found)
        for name in rings:
            if name in self._rings:
                continue
            path = os.path.join(self.directory, name)
            try:
                reader = self._open(name, path)
            except (OSError, ValueError) as exc:
                if name not in self.bad:
                    self.bad[name] = str(exc).replace(f"{path}: ", "").replace(path, name)
                    print(f"streamscope monitor: cannot read ring {path}: {exc}")
                    if isinstance(exc, ValueError):  # its contents: it was damaged
                        self._unread[name] = self.bad[name]
                continue
            ring = self._rings[name] = _Ring(reader, self._domain.get(reader.probe, HOST))
            self._place(ring)
        return len(self._rings)

    def _open(self, name: str, path: str) -> RingReader:
        """The ring ``name``: a file of its own, or a slot of a slab (mapped once)."""
        slot = slab_slot(name)
        if slot is None:
            return RingReader.open(path)
        file, i = slot
        slab = self._slabs.get(file)
        if slab is None:
            fd = os.open(os.path.join(self.directory, file), os.O_RDWR)
            try:
                size = file_size(fd)
                if size < SLAB_RINGS or size % SLAB_RINGS:
                    raise ValueError(f"{file}: not a slab of {SLAB_RINGS} rings ({size} bytes)")
                mem = map_shared(fd, size, guard=native)  # truncated: zeros, not SIGBUS
            finally:
                os.close(fd)
            slab = self._slabs[file] = [mem, size // SLAB_RINGS, 0, 0]
        slab[2] += 1
        return RingReader(slot_view(slab[0], i, slab[1]), path)

    def _let_go(self, path: str) -> None:
        """A retired ring's file removed: its own, or its slab once every slot of it was
        announced and retired."""
        slot = slab_slot(os.path.basename(path))
        if slot is not None:
            slab = self._slabs.get(slot[0])
            if slab is None:
                return
            slab[3] += 1
            if slab[2] < SLAB_RINGS or slab[3] < SLAB_RINGS:
                return
            del self._slabs[slot[0]]
            path = os.path.join(self.directory, slot[0])
        with contextlib.suppress(OSError):
            os.unlink(path)

    def drain(self, budget: int | None = None, to_ns: ToNs | None = None) -> Drain:
        """Take every ring's new records (at most ``budget`` in all), refusals and counter
        changes.

        Over budget, the rings are drained up to a common frontier in virtual time (``to_ns``
        places a domain's ticks; None: not yet): what one ring gives beyond the others' oldest
        record left would wait in the monitor until they catch up, so it waits in its ring
        instead. Without ``to_ns`` each ring gets its share of the budget first, then what the
        others left over."""
        out = Drain()
        rings = self._astir()
        if not rings:
            return out
        limits: dict[int, int] | None = None
        if budget is not None:
            pending = {id(r): r.reader.pending for r in rings}
            if sum(pending.values()) > budget:
                if to_ns is not None:
                    limits = self._aligned(rings, pending, budget, to_ns)
                else:
                    limits = self._shares(rings, pending, budget)
        taken: dict[str, list[tuple[RingReader, Records]]] = {}
        for ring in rings:
            closed = ring.reader.closed  # read first: every record it wrote is drained below
            d = ring.reader.drain(limits[id(ring)] if limits is not None else None)
            if closed and not ring.reader.pending:
                self._retire(ring)
            if d.left_ticks is not None:
                held = out.left.get(ring.domain)
                out.left[ring.domain] = d.left_ticks if held is None else min(held, d.left_ticks)
            recs = d.records
            counter = ring.reader.capacity == 0 and ring.reader.kind == Kind.COUNT
            if counter and d.total != ring.last_total:
                # A counter's register: one COUNT record of its total, at its last change.
                ring.last_total = d.total
                recs = make_records(
                    int(Kind.COUNT),
                    ring.reader.probe,
                    np.array([d.last], dtype=np.int64),
                    np.array([d.total], dtype=np.int64),
                )
            if len(recs):
                taken.setdefault(ring.domain, []).append((ring.reader, recs))
            if d.dropped:
                pid = ring.reader.probe
                out.drops.append((pid, d.dropped))
                out.refused[pid] = max(out.refused.get(pid, d.refused), d.refused)
        for dom, parts in taken.items():
            recs = sound(parts, self._known_ids, self.scan)
            if len(recs):
                out.records[dom] = [recs]
                out.n_records += len(recs)
        return out

    def _known_ids(self) -> np.ndarray:
        if self._known is None:
            self._known = np.array(sorted(self._domain), dtype=np.uint32)
        return self._known

    def damage_notes(self) -> list[tuple[str, str]]:
        """Each ring found damaged (``about``: ``damaged``): which, whose, and what was wrong."""
        found = [*self._damaged]
        found += [
            (name, r.reader.probe, r.reader.pid, r.reader.damage)
            for name, r in self._rings.items()
            if r.reader.damage
        ]
        out = [
            (DAMAGED, f"ring {name} could not be read: {why}") for name, why in self._unread.items()
        ]
        out += [(DAMAGED, damage_text(*f)) for f in found]
        return out

    def _astir(self) -> list[_Ring]:
        """The rings that hold anything to take (records, a close, refusals, a register's
        total): one native pass over every ring's header, so that thousands of idle rings
        (a program's queues that wait) cost a few ns each per drain, not a Python step."""
        order = self._order
        if len(order) < 64:
            return list(order)
        k = len(order)
        n = native.astir(self._addrs[:k], self._flags)
        if n == k:
            return list(order)
        return [order[i] for i in np.flatnonzero(self._flags[:k]).tolist()]

    def _place(self, ring: _Ring) -> None:
        k = len(self._order)
        if k == len(self._addrs):
            self._addrs = np.concatenate((self._addrs, np.zeros(k, dtype=np.uint64)))
            self._flags = np.zeros(2 * k, dtype=np.uint8)
        ring.index = k
        self._addrs[k] = ring.reader.address
        self._order.append(ring)

    def _unplace(self, ring: _Ring) -> None:
        """``ring`` leaves the order (before it is unmapped: its address is never read again)."""
        i, last = ring.index, self._order.pop()
        if last is not ring:
            self._order[i], last.index = last, i
            self._addrs[i] = self._addrs[len(self._order)]
        ring.index = -1

    def _shares(self, rings: list[_Ring], pending: dict[int, int], budget: int) -> dict[int, int]:
        """Each ring its share of ``budget``, then what the others left over, in turn."""
        share = max(budget // len(rings), 1)
        limits = {k: min(v, share) for k, v in pending.items()}
        left = budget - sum(limits.values())
        self._turn = (self._turn + 1) % len(rings)
        for ring in rings[self._turn :] + rings[: self._turn]:
            extra = min(pending[id(ring)] - limits[id(ring)], left)
            limits[id(ring)] += extra
            left -= extra
        return limits

    @staticmethod
    def _aligned(
        rings: list[_Ring], pending: dict[int, int], budget: int, to_ns: ToNs
    ) -> dict[int, int]:
        """How much of each ring lies before a common frontier, the latest one whose records
        fit in ``budget``: the earliest of every ring's share-th record, with twice the share
        while that fits. A ring whose domain cannot be placed yet gets its share."""
        share = max(budget // len(rings), 1)
        best: dict[int, int] | None = None
        while True:
            placed: dict[int, Callable[[int], int]] = {}
            frontier: int | None = None
            for ring in rings:
                dom = ring.domain
                if not pending[id(ring)] or to_ns(dom, ring.reader.ticks_at(0)) is None:
                    continue  # not placed in time yet: its share, no more
                placed[id(ring)] = _placer(to_ns, dom)
                if pending[id(ring)] > share:
                    t = placed[id(ring)](ring.reader.ticks_at(share - 1))
                    frontier = t if frontier is None else min(frontier, t)
            if frontier is None:  # no ring placed in time holds more than its share
                return best if best is not None else {k: min(v, share) for k, v in pending.items()}
            limits = {}
            for ring in rings:
                n = min(pending[id(ring)], share)
                at = placed.get(id(ring))
                limits[id(ring)] = n if at is None else ring.reader.count_until(frontier, n, at)
            if best is not None and sum(limits.values()) > budget:
                return best
            best = limits
            share *= 2

    def _retire(self, ring: _Ring) -> None:
        """A ring its writer closed (its queue dropped), drained to its last record: removed
        from the directory and unmapped (once the records copied out of it are let go)."""
        path = ring.reader.path
        self._rings.pop(os.path.basename(path), None)
        self._unplace(ring)
        self._add_cost(self._spent, ring.reader)
        if ring.reader.damage:
            name = os.path.basename(path)
            self._damaged.append((name, ring.reader.probe, ring.reader.pid, ring.reader.damage))
        self.retired += 1
        self.closed.append(ring.reader.probe)
        self._let_go(path)
        ring.reader.close()

    def take_closed(self) -> list[int]:
        """Probes whose ring was closed and removed since the last call."""
        out, self.closed = self.closed, []
        return out

    def gone(self) -> list[int]:
        """Probes whose ring's writer process ended since the last call, their rings empty
        (everything they recorded is drained)."""
        out = []
        me = os.getpid()
        live: dict[int, bool] = {}  # one look per process, not per ring
        for ring in self._rings.values():
            r = ring.reader
            if ring.gone or r.pid == me or r.pending:
                continue
            up = live.get(r.pid)
            if up is None:
                up = live[r.pid] = alive(r.pid)
            if up:
                continue
            ring.gone = True
            out.append(r.probe)
        return out

    def costs(self) -> dict[int, RingCost]:
        """Per probe (the ring's own probe id), what its rings sampled of their cost so far."""
        acc = {p: list(a) for p, a in self._spent.items()}
        for ring in self._rings.values():
            self._add_cost(acc, ring.reader)
        return {p: RingCost(a[0], a[1], a[2], a[3]) for p, a in acc.items()}

    @staticmethod
    def _add_cost(acc: dict[int, list[int]], r: RingReader) -> None:
        d = r.stats()
        a = acc.setdefault(r.probe, [0, 0, 0, r.flags])
        a[0] += d.cost_ns
        a[1] += d.cost_n
        a[2] += d.written + d.dropped

    def pending(self) -> int:
        """Records written and not yet drained, over every ring."""
        return sum(r.reader.pending for r in self._rings.values())

    def close(self) -> None:
        self._order = []
        for ring in self._rings.values():
            with contextlib.suppress(BufferError, ValueError):
                ring.reader.close()
        self._rings.clear()
        self._slabs.clear()
