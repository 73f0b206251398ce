"""Probe rings in shared memory: the layout writer and reader agree on, and where rings live.

In: a probe id, a record kind and a capacity. Out: a zeroed, headed mapping (a file in the run's
ring directory that the monitor finds, or an anonymous one) for ``core.native.Ring`` to write and
``transport.ringreader.RingReader`` to drain. One writer per ring; it never waits for the reader.

Layout (little-endian 64-bit words; one cache line per owner so neither side invalidates the
other's line on every record)::

    word  0  magic "SSR1" and the layout version       (set once by the creator)
    word  1  probe id the ring belongs to               (its clock domain and cost go there)
    word  2  record kind written by ``record``
    word  3  capacity in records (a power of two; 0: a register, no records)
    word  4  pid of the writing process
    word  5  flags: how the ring is written (its cost class, ``probes.taps.COST_*``)
    word  6  closed: 1 once the writer is done with it (its queue dropped); the monitor
             drains what is left, then removes the file
    words 8-15, the writer's line:
         8  w        records written (monotonic; slot = w mod capacity)
         9  dropped  records refused because the ring was full (monotonic)
        10  total    a counter register (``add``)
        11  last     ticks of the register's last change
        12  cost_ns  sampled time spent recording (ns, one event in SAMPLE_EVERY)
        13  cost_n   events sampled
        14  refused  value of the latest refused record (a channel end's sequence number: the
                     items refused after the last kept record are counted from it)
    words 16-23, the reader's line:
        16  r        records read (monotonic)
    byte 256 on: ``capacity`` records of 24 bytes
"""

from __future__ import annotations

import ctypes
import itertools
import json
import mmap
import os
import struct
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamscope.core import forksafe, heldio
from streamscope.core.errors import RunFileError
from streamscope.core.records import RECORD_FIELDS
from streamscope.core.topology import Topology

MAGIC = 0x31525353  # b"SSR1" little-endian
VERSION = 1
HEADER_BYTES = 256
RECORD_BYTES = sum(int(code[2:]) for _, code in RECORD_FIELDS)  # "<u4": 4 bytes
#: One event in this many is timed while the run goes on (``cost_ns``/``cost_n``).
SAMPLE_EVERY = 1024

W_MAGIC, W_PROBE, W_KIND, W_CAPACITY, W_PID, W_FLAGS, W_CLOSED = 0, 1, 2, 3, 4, 5, 6
W_W, W_DROPPED, W_TOTAL, W_LAST, W_COST_NS, W_COST_N, W_REFUSED = 8, 9, 10, 11, 12, 13, 14
W_R = 16

#: Suffix of a published ring file (written under a temporary name, then renamed).
SUFFIX = ".ring"
#: Serial of the rings this process made (with its pid, a name no other process can take).
_counter = itertools.count()


def ring_bytes(capacity: int) -> int:
    return HEADER_BYTES + capacity * RECORD_BYTES


def check_capacity(capacity: int) -> None:
    if capacity < 0 or (capacity & (capacity - 1)):
        raise ValueError(f"ring capacity must be 0 or a power of two, got {capacity}")


#: The header's first words, ``W_MAGIC`` to ``W_FLAGS``, written at once.
_HEAD = struct.Struct("<6q")
assert tuple(range(6)) == (W_MAGIC, W_PROBE, W_KIND, W_CAPACITY, W_PID, W_FLAGS)


def init_header(mem: Any, probe: int, kind: int, capacity: int, flags: int) -> None:
    """Write a new ring's header (its writer's process the calling one)."""
    _HEAD.pack_into(mem, 0, MAGIC | (VERSION << 32), probe, kind, capacity, os.getpid(), flags)


def anonymous_ring(probe: int, kind: int, capacity: int, *, flags: int = 0) -> mmap.mmap:
    """A ring only this process (and processes it forks later) can see."""
    check_capacity(capacity)
    mem = mmap.mmap(-1, ring_bytes(capacity))
    init_header(mem, probe, kind, capacity, flags)
    return mem


def create_ring_file(
    directory: str | Path, probe: int, kind: int, capacity: int, *, flags: int = 0
) -> Any:
    """A ring the monitor finds in ``directory``, named after the writing process so that
    processes never collide: the monitor learns of it from the journal line written once its
    header is (so it never sees one half made). The mapping holds no file descriptor
    (``map_shared``)."""
    check_capacity(capacity)
    name = f"{os.getpid()}-{next(_counter)}{SUFFIX}"
    # Its system calls keep the interpreter's lock (``heldio``): a program's threads making
    # their rings at once are not held up behind each other's.
    fd = heldio.open_file(os.path.join(directory, name), os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        heldio.truncate(fd, ring_bytes(capacity))
        mem = map_shared(fd, ring_bytes(capacity))
    finally:
        heldio.close(fd)
    init_header(mem, probe, kind, capacity, flags)
    journal(directory, f"R {name}")
    return mem


def close_ring(mem: Any) -> None:
    """The writer is done with this ring: the monitor drains what is left and removes it."""
    struct.pack_into("<q", mem, W_CLOSED * 8, 1)


# -- shared mappings without a file descriptor ----------------------------------------------
#
# ``mmap.mmap`` keeps a duplicate of the file's descriptor for as long as the mapping lives:
# a program that makes thousands of queues would run out of descriptors because it is watched.
# A ring's mapping is made here instead: the file's descriptor is closed once it is mapped, and
# the mapping is a ctypes array (a writable buffer) unmapped when nothing refers to it any more
# (the hot path's ring and every numpy view hold it while they use it).

_PROT = mmap.PROT_READ | mmap.PROT_WRITE


#: The C library (its mmap, munmap and madvise: calls that keep the interpreter's lock,
#: ``heldio``), None where it cannot be reached.
_LIBC = heldio.LIBC
_MAP_FAILED = ctypes.c_void_p(-1).value


class Mapped:
    """What a shared mapping offers besides its bytes (mixed into its ctypes array type)."""

    def madvise(self, option: int, start: int = 0, length: int | None = None) -> None:
        """As ``mmap.mmap.madvise``, within the mapping only (ValueError past it, as there):
        advice past its end would fall on whatever this process maps beside it."""
        size = ctypes.sizeof(self)  # type: ignore[arg-type]
        n = size - start if length is None else length
        if not (0 <= start <= size and 0 <= n <= size - start):
            raise ValueError(f"madvise: bytes {start}+{n} lie outside the {size}-byte mapping")
        if _LIBC.madvise(ctypes.addressof(self) + start, n, option) != 0:  # type: ignore[arg-type]
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def close(self) -> None:
        """Nothing: the mapping goes when the last buffer over it does (closing it under the
        hot path's feet would be a crash, not an error)."""


#: One mapping type per size, made once per process (ctypes makes a type per array length).
_types: dict[int, Any] = {}


def map_shared(fd: int, size: int, *, guard: Any = None) -> Any:
    """``size`` bytes of the file ``fd`` mapped shared, read and write; ``fd`` may be closed
    at once. Where the C library cannot be reached, an ``mmap.mmap`` (which holds a
    descriptor). ``guard``: the probe core (``core.native``) whose ``guard_mapping`` makes a
    read past the file's end, once another process truncated it, read zeros instead of
    killing this process with SIGBUS (a reader's mappings, never a writer's)."""
    if _LIBC is None:
        return mmap.mmap(fd, size)
    addr = _LIBC.mmap(None, size, _PROT, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    mem = mapping_type(size).from_address(addr)
    # Unmapped once nothing refers to it, but not as the interpreter exits (``atexit``): its
    # daemon threads still run then, and one recording into a ring unmapped under it was
    # killed by SIGSEGV (a program whose daemon workers were busy as it ended, 8 runs in 10).
    # The process's end takes the mapping with it.
    if guard is not None:
        guard.guard_mapping(addr, size)
        weakref.finalize(mem, _unmap_guarded, guard, addr, size).atexit = False
    else:
        weakref.finalize(mem, _LIBC.munmap, addr, size).atexit = False
    return mem


def mapping_type(size: int) -> Any:
    """The ctypes type of a shared mapping of ``size`` bytes (``Mapped``'s methods with it):
    made once per size in a process."""
    kind: Any = _types.get(size)
    if kind is None:
        kind = _types[size] = type("SharedMapping", (ctypes.c_char * size, Mapped), {})
    return kind


def _unmap_guarded(guard: Any, addr: int, size: int) -> None:
    guard.unguard_mapping(addr)  # first: the address may be mapped again at once
    _LIBC.munmap(addr, size)


def file_size(fd: int) -> int:
    return os.fstat(fd).st_size


def ring_directory(base: str) -> str:
    """Where a run's rings live: tmpfs (``/dev/shm``) when this machine has one, so that the
    rings are memory and never written back to a disk; ``base`` otherwise."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(base)
    path = root / f"streamscope-{os.getpid()}-{os.urandom(4).hex()}"
    path.mkdir(mode=0o700)
    return str(path)


def declare(directory: str | Path, found: Topology) -> None:
    """Tell the monitor what the probes of ``found`` measure, before their rings appear (or
    that stages or channels no query watches exist): a line of the run's journal (``J`` and
    the topology's JSON, written whole: a program declaring a thousand workers makes no
    thousand files)."""
    journal(directory, f"{DECLARED} {json.dumps(found.to_dict())}")


#: The run's journal: one line per declaration (``J`` and its JSON) and per ring (``R NAME``)
#: in the order they were published, appended by every process of the run, so that the
#: monitor finds what is new by reading on from where it stopped (never by listing a
#: directory that may hold tens of thousands of files).
JOURNAL = "journal"
#: A journal line's mark for a declaration.
DECLARED = "J"
#: The journal this process appends to, open (one at a time: a session's, by directory), and
#: the process that opened it (a forked child opens its own, so that closing it is its own).
_journal_fd: list[Any] = [None, None, -1]
_journal_lock = forksafe.lock()


def journal(directory: str | Path, line: str) -> None:
    """Append ``line`` to the run's journal (one write of a whole line, on a descriptor opened
    for appending: lines of different processes never interleave)."""
    key = str(directory)
    data = f"{line}\n".encode()
    with _journal_lock:
        d, fd, pid = _journal_fd
        if d != key or pid != os.getpid():
            if fd is not None and pid == os.getpid():
                os.close(fd)
            path = os.path.join(key, JOURNAL)
            fd = heldio.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            _journal_fd[:] = [key, fd, os.getpid()]
        heldio.write(fd, data)  # under ``_journal_lock``: the interpreter's kept (``heldio``)


def close_journal() -> None:
    """This process appends to no journal any more (its session ended)."""
    with _journal_lock:
        _, fd, pid = _journal_fd
        if fd is not None and pid == os.getpid():
            os.close(fd)
        _journal_fd[:] = [None, None, -1]


def parse_declaration(text: str) -> Topology:
    """A declaration's topology from its journal line's JSON (RunFileError: not one)."""
    try:
        return Topology.from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError) as exc:
        raise RunFileError(f"a journal line is not a probe declaration ({exc})") from exc


class JournalReader:
    """Reads a run's journal on from where it stopped (mutable: its offset)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / JOURNAL
        self._offset = 0
        self._rest = b""

    def new_lines(self) -> list[str]:
        """The whole lines appended since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        if not data:
            return []
        self._offset += len(data)
        data = self._rest + data
        cut = data.rfind(b"\n") + 1
        self._rest = data[cut:]
        return data[:cut].decode(errors="replace").splitlines()


def _declarations(directory: str | Path) -> Iterator[Topology]:
    """What was declared in ``directory`` so far, in the order declared (a line that is not a
    declaration passed over: the monitor says so)."""
    for line in JournalReader(directory).new_lines():
        what, _, text = line.partition(" ")
        if what == DECLARED:
            try:
                yield parse_declaration(text)
            except RunFileError:
                continue


def declares(directory: str | Path, base: Topology) -> tuple[bool, bool]:
    """Whether ``base`` with what was declared in ``directory`` has a stage, and a channel
    (read only as far as both are found: a program of thousands of threads declares thousands
    of times, and ``declared`` merges each into the whole)."""
    stage, channel = bool(base.stages), bool(base.channels)
    for part in _declarations(directory):
        if stage and channel:
            break
        stage, channel = stage or bool(part.stages), channel or bool(part.channels)
    return stage, channel


def declared(directory: str | Path, base: Topology) -> Topology:
    """``base`` with everything declared in ``directory`` so far (in the order declared)."""
    for part in _declarations(directory):
        try:
            base = base.merged(part)
        except RunFileError:
            continue  # the monitor says so
    return base


#: The run's shared counter of probe ids (a file in its ring directory).
_IDS = "next-probe-id"


def set_next_probe_id(directory: str | Path, first: int) -> None:
    """Probes made during the run are numbered from ``first`` (the run's own come before)."""
    (Path(directory) / _IDS).write_text(str(first))


#: Probe ids this process took ahead and has not handed out yet, by directory: (next, end).
#: Process-wide (a forked child takes its own: ``_reserved`` is emptied in it).
_reserved: dict[str, tuple[int, int]] = {}
#: Guards ``_reserved`` among this process's threads (free again in a forked child).
_reserving = forksafe.lock()
#: How many ids a process takes at once when it hands them out one at a time (a program making
#: a worker or a queue at a time takes the run's shared counter once per this many).
_AHEAD = 64


def next_probe_ids(directory: str | Path, n: int) -> int:
    """Take ``n`` probe ids no other process (nor thread) of the run takes; returns the first.
    A few at a time, they come from a block this process took ahead (ids are unique, not
    dense)."""
    if n > _AHEAD:
        return _take_ids(directory, n)
    key = str(directory)
    with _reserving:
        nxt, end = _reserved.get(key, (0, 0))
        if nxt + n > end:
            nxt = _take_ids(directory, _AHEAD)
            end = nxt + _AHEAD
        _reserved[key] = (nxt + n, end)
    return nxt


def _forget_reserved() -> None:
    _reserved.clear()


os.register_at_fork(after_in_child=_forget_reserved)


def _take_ids(directory: str | Path, n: int) -> int:
    """``n`` ids from the run's shared counter (a file, locked). Its system calls keep the
    interpreter's lock (``heldio``): let go, each gave the program's other threads their turn
    first, and a program starting 500 threads waited 1.8 ms a take, 40 ms in all."""
    fd = heldio.open_file(os.path.join(directory, _IDS), os.O_RDWR)
    try:
        heldio.lock(fd)
        try:
            first = int(heldio.pread(fd, 32, 0) or b"1")
            text = str(first + n).encode()
            heldio.write(fd, text)  # at its start: nothing read or written on it yet
            heldio.truncate(fd, len(text))
        finally:
            heldio.unlock(fd)
    finally:
        heldio.close(fd)
    return first
