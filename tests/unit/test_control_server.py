"""The monitor's control server lets its accepting thread go when it is closed.

A monitor in the program's own process (``mode="inline"``, a notebook's runs) made one such
thread per run, and closing the socket never woke it from ``accept``: a session of many runs
kept them all.
"""

from __future__ import annotations

import platform
import queue
import socket
import threading
import time
from pathlib import Path

from streamscope.monitor.control import ControlServer


def _accepting() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "streamscope-accept" and t.is_alive()}


def _until_in_accept(t: threading.Thread) -> None:
    """Until ``t`` is blocked in the ``accept4`` system call (its number on this machine's
    ABI, read from the kernel's own account of the thread)."""
    accept4 = {"x86_64": "288", "aarch64": "242"}[platform.machine()]
    syscall = Path(f"/proc/self/task/{t.native_id}/syscall")
    while syscall.read_text().split()[0] != accept4:
        time.sleep(0.001)


def test_closing_the_server_ends_its_accepting_thread(tmp_path: Path) -> None:
    before = _accepting()
    path = str(tmp_path / "control.sock")
    server = ControlServer(queue.Queue(), None, path)
    (mine,) = _accepting() - before
    _until_in_accept(mine)  # blocked there, where closing the socket would not wake it
    server.close()
    mine.join(5.0)
    assert not mine.is_alive()
    assert not Path(path).exists()


def test_a_listener_handed_over_is_left_to_its_maker(tmp_path: Path) -> None:
    path = str(tmp_path / "handed.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    twin = listener.dup()  # the maker's own copy (a forked monitor's parent's)
    server = ControlServer(queue.Queue(), listener, None)
    server.close()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(path)  # still listening: not shut down under its maker
    twin.close()
