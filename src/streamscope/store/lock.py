"""One writer per run file, and what to do with a file whose writer is gone.

In: a run file's path. Out: ``WriterLock``, an exclusive ``flock`` on ``<file>.lock`` beside it
(its owner's alone, as the run file: ``store.private``),
taken before the run file is created and held until the run is finished (a child that inherits
the descriptor, the monitor process, holds it too: the lock lasts while either lives, and the
kernel drops it when both are gone, however they ended); ``writer_alive``, whether anyone holds
it; ``repair``, which finalises a file left ``running`` by a writer that is gone (a post-mortem
consistency repair: its status becomes ``failed`` with the cause, every frame it committed
stays).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from streamscope.core.errors import RunFileError
from streamscope.store.private import PRIVATE

#: Said when a file is found ``running`` with nobody writing it.
WRITER_GONE = "the process that wrote this run ended without finishing it (killed, or crashed)"
#: What a lock taken to repair a file says after its holder (a reader waits for it to end).
REPAIRING = "repairing it"
#: How long (s) a reader waits for another process's repair before it says who holds the file.
REPAIR_WAIT_S = 30.0


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class WriterLock:
    """The exclusive right to write the run file at ``path`` (see the module docstring).

    ``acquire`` raises ``RunFileError`` naming the process that holds it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fd: int | None = None

    @classmethod
    def adopt(cls, path: str | Path, fd: int) -> WriterLock:
        """The lock a parent took, through the descriptor this process inherited."""
        lock = cls(path)
        lock.fd = fd
        return lock

    def acquire(self, why: str = "") -> WriterLock:
        """Take the lock (``why``: what its holder does, said after its pid to who finds it)."""
        lp = lock_path(self.path)
        lp.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(lp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _holder(fd)
                os.close(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise RunFileError(f"cannot lock {self.path} for writing: {e}") from None
                raise RunFileError(
                    f"{self.path} is being written by another run ({holder}); wait for it to "
                    "end or choose another path"
                ) from None
            # The lock file may have been removed (its writer finished) between our open and
            # our lock: then we hold a lock on nothing; take the one at the path.
            try:
                same = os.fstat(fd).st_ino == os.stat(lp).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        said = f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        os.write(fd, f"{said}{', ' + why if why else ''}\n".encode())
        self.fd = fd
        return self

    def inheritable(self) -> int:
        """The descriptor, for a child process that writes the file on this lock's behalf."""
        assert self.fd is not None
        os.set_inheritable(self.fd, True)
        return self.fd

    def release(self) -> None:
        """Remove the lock file and let go (the unlink comes first, under the lock)."""
        if self.fd is None:
            return
        lock_path(self.path).unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "a process that has not said which"


def writer_alive(path: str | Path) -> bool:
    """Whether a process holds the writer's lock of the run file at ``path``."""
    fd = _lock_file(path)
    if fd is None:
        return False
    try:
        return not _free(fd)
    finally:
        os.close(fd)


def wait_for_repair(path: str | Path, limit_s: float = REPAIR_WAIT_S) -> bool:
    """Wait while another process repairs the run file at ``path`` (its lock says
    ``REPAIRING``), up to ``limit_s``; whether there was such a repair, ended now."""
    fd = _lock_file(path)
    if fd is None:
        return False
    try:
        if REPAIRING not in _holder(fd):
            return False
        deadline = time.monotonic() + limit_s
        while not _free(fd):
            if time.monotonic() > deadline:
                return False  # the caller says who holds it
            time.sleep(0.01)
        return True
    finally:
        os.close(fd)


def _lock_file(path: str | Path) -> int | None:
    """A descriptor of the lock file of the run file at ``path`` (None: there is none)."""
    try:
        return os.open(lock_path(Path(path)), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _free(fd: int) -> bool:
    """Whether nobody holds the lock of the lock file ``fd`` (a shared lock taken to see, held
    until ``fd`` is closed)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def repair(path: str | Path, cause: str = WRITER_GONE, *, holding: bool = False) -> bool:
    """Finalise a run file left ``running`` as ``failed`` with ``cause`` (the duration: up to
    its last frame); nothing it holds is removed. A no-op, returning False, when the file is
    finished already or another process holds its lock: its writer, or another repair
    (``holding``: this process holds it, and its writer is gone; otherwise the lock is taken
    for the repair, saying so, and a stale lock file goes with it)."""
    p = Path(path)
    if holding:
        return _repair(p, cause)
    try:
        lock = WriterLock(p).acquire(REPAIRING)
    except RunFileError as e:
        if writer_alive(p):
            return False
        raise RunFileError(f"{p} cannot be repaired: {e}") from None
    try:
        return _repair(p, cause)
    finally:
        lock.release()


def _repair(p: Path, cause: str) -> bool:
    from streamscope.store import _sqlio
    from streamscope.store.duck import duckdb

    try:
        con = duckdb.connect(str(p))
    except duckdb.Error as e:
        raise RunFileError(f"{p} cannot be repaired: {e}") from None
    try:
        (status, started), *_ = con.execute("SELECT status, started_unix_ns FROM run").fetchall()
        if status != "running":
            return False
        (last,) = con.execute("SELECT coalesce(max(t_end_ns), 0) FROM frame").fetchone() or (0,)
        con.execute("BEGIN TRANSACTION")
        _sqlio.set_status(con, "failed", cause, int(started) + int(last), int(last))
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
    except duckdb.Error as e:
        raise RunFileError(f"{p} cannot be repaired: {e}") from None
    finally:
        con.close()
    p.with_name(p.name + ".reserve").unlink(missing_ok=True)  # a killed writer's reserve
    return True
