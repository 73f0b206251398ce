"""``core.heldio``: the system calls made holding the interpreter's lock give what ``os`` and
``fcntl`` give, errors included, and a lock another process holds is waited for."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from streamscope.core import heldio


def test_the_calls_give_what_os_gives(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = heldio.open_file(str(path), os.O_RDWR | os.O_CREAT | os.O_APPEND)
    try:
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        assert heldio.write(fd, b"one\n") == 4 and heldio.write(fd, b"two\n") == 4
        assert heldio.size(fd) == 8 == os.fstat(fd).st_size
        assert heldio.pread(fd, 100, 4) == b"two\n" == os.pread(fd, 100, 4)
        assert heldio.pread(fd, 3, 0) == b"one"
        heldio.truncate(fd, 3)
        assert path.read_bytes() == b"one"
    finally:
        heldio.close(fd)
    with pytest.raises(FileExistsError, match="exists") as raised:
        heldio.open_file(str(path), os.O_RDWR | os.O_CREAT | os.O_EXCL)
    assert raised.value.errno == errno.EEXIST
    with pytest.raises(OSError, match="Bad file descriptor") as raised:
        heldio.close(fd)  # closed already
    assert raised.value.errno == errno.EBADF


def test_a_lock_another_process_holds_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    path.touch()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(0.5)\n"
         "f.write('holder\\n'); f.flush()", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    ticks = []
    ticker = threading.Thread(target=lambda: ticks.extend(range(3)))  # runs while we wait
    fd = heldio.open_file(str(path), os.O_RDWR | os.O_APPEND)
    try:
        ticker.start()
        heldio.lock(fd)  # blocks until the holder ends, the interpreter's lock let go
        heldio.write(fd, b"me\n")
        heldio.unlock(fd)
    finally:
        heldio.close(fd)
        holder.wait(timeout=30)
    ticker.join()
    assert path.read_text() == "holder\nme\n" and ticks == [0, 1, 2]
