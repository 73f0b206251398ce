"""What a program's process tells of its setup (``auto.costs``): nested work counted once,
every process's file added up, and a fork while another thread counts leaves the child free."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from streamscope.pipeline.program.auto import costs
from streamscope.pipeline.program.registry import gathered


def _spin(ns: int) -> None:
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass


def test_nested_work_is_counted_once_and_every_process_is_added(tmp_path: Path) -> None:
    costs.start_afresh()
    with costs.spent():
        _spin(2_000_000)
        with costs.spent(queues=1):  # inside: its queue counted, its time already is
            _spin(2_000_000)
    costs.one_more_thread()
    costs.told(str(tmp_path))
    (one,) = tmp_path.iterdir()
    got = gathered(tmp_path)
    assert (got["threads"], got["queues"]) == (1, 1)
    assert 4_000_000 <= got["setup_ns"] < 8_000_000  # counted once, not 6 ms
    (tmp_path / "setup.1").write_text(one.read_text())  # another process's, the same
    assert gathered(tmp_path)["setup_ns"] == 2 * got["setup_ns"]
    (tmp_path / "setup.2").write_text("{not json")  # one killed while it wrote: left out
    assert gathered(tmp_path)["queues"] == 2
    costs.start_afresh()


def test_a_child_forked_while_another_thread_counts_is_not_held(tmp_path: Path) -> None:
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with costs._LOCK:  # another thread in the middle of a count
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    pid = os.fork()
    if pid == 0:
        costs.start_afresh()
        with costs.spent(queues=1):
            pass
        costs.told(str(tmp_path))
        os._exit(0)
    leave.set()
    t.join()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the child waited on a lock its parent's thread held")
    assert os.waitstatus_to_exitcode(status) == 0
    assert gathered(tmp_path)["queues"] == 1
