"""Probe rings in shared memory: the layout writer and reader agree on, and where rings live.

In: a probe id, a record kind and a capacity. Out: a zeroed, headed mapping (a file in the run's
ring directory that the monitor finds, or an anonymous one) for ``core.native.Ring`` to write and
``transport.ring.RingReader`` to drain. One writer per ring; it never waits for the reader.

Layout (little-endian 64-bit words; one cache line per owner so neither side invalidates the
other's line on every record)::

    word  0  magic "SSR1" and the layout version       (set once by the creator)
    word  1  probe id the ring belongs to               (its clock domain and cost go there)
    word  2  record kind written by ``record``
    word  3  capacity in records (a power of two; 0: a register, no records)
    word  4  pid of the writing process
    word  5  flags: how the ring is written (its cost class, ``probes.taps.COST_*``)
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

import fcntl
import itertools
import json
import mmap
import os
import shutil
import time
from pathlib import Path

import numpy as np

from streamscope.core.errors import RunFileError
from streamscope.core.records import RECORD_DTYPE
from streamscope.core.topology import Topology

MAGIC = 0x31525353  # b"SSR1" little-endian
VERSION = 1
HEADER_BYTES = 256
RECORD_BYTES = RECORD_DTYPE.itemsize
#: One event in this many is timed while the run goes on (``cost_ns``/``cost_n``).
SAMPLE_EVERY = 1024

W_MAGIC, W_PROBE, W_KIND, W_CAPACITY, W_PID, W_FLAGS = 0, 1, 2, 3, 4, 5
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


def _init(mem: mmap.mmap, probe: int, kind: int, capacity: int, flags: int) -> None:
    head = np.frombuffer(mem, dtype="<i8", count=HEADER_BYTES // 8)
    head[W_MAGIC] = MAGIC | (VERSION << 32)
    head[W_PROBE] = probe
    head[W_KIND] = kind
    head[W_CAPACITY] = capacity
    head[W_PID] = os.getpid()
    head[W_FLAGS] = flags


def anonymous_ring(probe: int, kind: int, capacity: int, *, flags: int = 0) -> mmap.mmap:
    """A ring only this process (and processes it forks later) can see."""
    check_capacity(capacity)
    mem = mmap.mmap(-1, ring_bytes(capacity))
    _init(mem, probe, kind, capacity, flags)
    return mem


def create_ring_file(
    directory: str | Path, probe: int, kind: int, capacity: int, *, flags: int = 0
) -> mmap.mmap:
    """A ring the monitor finds in ``directory``: it appears whole (written under a temporary
    name, then renamed), named after the writing process so that processes never collide."""
    check_capacity(capacity)
    base = Path(directory) / f"{os.getpid()}-{next(_counter)}"
    tmp = base.with_suffix(".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, ring_bytes(capacity))
        mem = mmap.mmap(fd, ring_bytes(capacity))
    finally:
        os.close(fd)
    _init(mem, probe, kind, capacity, flags)
    os.rename(tmp, base.with_suffix(SUFFIX))
    return mem


def ring_directory(base: str) -> str:
    """Where a run's rings live: tmpfs (``/dev/shm``) when this machine has one, so that the
    rings are memory and never written back to a disk; ``base`` otherwise."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(base)
    _sweep(root)
    path = root / f"streamscope-{os.getpid()}-{os.urandom(4).hex()}"
    path.mkdir(mode=0o700)
    return str(path)


#: A run's directory is left behind only when its application and its monitor were both
#: killed; the next run removes it once its application is gone and it is this old (s).
STALE_AFTER_S = 60.0


def _sweep(root: Path) -> None:
    """Remove the run directories whose application is gone (killed with its monitor)."""
    now = time.time()
    for d in root.glob("streamscope-*-*"):
        try:
            pid = int(d.name.split("-")[1])
            if now - d.stat().st_mtime < STALE_AFTER_S:
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, OSError):
            continue


#: A declaration: what a probe that appeared during the run measures (``declare``).
DECLARATION = ".decl"
_IDS = "next-probe-id"


def declare(directory: str | Path, found: Topology) -> None:
    """Tell the monitor what the probes of ``found`` measure, before their rings appear (or
    that stages or channels no query watches exist): one file per declaration, named after its
    first probe or a number of its own (written whole, then renamed)."""
    key = found.probes[0].id if found.probes else next_probe_ids(directory, 1)
    path = Path(directory) / f"{key}{DECLARATION}"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(found.to_dict()))
    os.rename(tmp, path)


def declared(directory: str | Path, base: Topology) -> Topology:
    """``base`` with everything declared in ``directory`` so far (in the order declared)."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(DECLARATION))
    except OSError:
        return base
    for name in names:
        try:
            found = declaration(directory, int(name.removesuffix(DECLARATION)))
        except (RunFileError, ValueError):
            continue  # the monitor says so
        if found is not None:
            base = base.merged(found)
    return base


def declaration(directory: str | Path, probe: int) -> Topology | None:
    """The declaration of ``probe``'s ring, if one was written (a probe made during the run)."""
    path = Path(directory) / f"{probe}{DECLARATION}"
    try:
        return Topology.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise RunFileError(f"{path}: not a probe declaration ({exc})") from exc


def set_next_probe_id(directory: str | Path, first: int) -> None:
    """Probes made during the run are numbered from ``first`` (the run's own come before)."""
    (Path(directory) / _IDS).write_text(str(first))


def next_probe_ids(directory: str | Path, n: int) -> int:
    """Take ``n`` probe ids no other process of the run takes; returns the first."""
    path = Path(directory) / _IDS
    with open(path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            first = int(f.read() or "1")
            f.seek(0)
            f.write(str(first + n))
            f.truncate()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    return first
