"""What an unmodified asyncio program's task waits on besides queues, under ``streamscope run``:
a task awaiting the end of its ``TaskGroup``, a ``gather`` or another task is idle (its own
work is over, as a thread joining threads is); one awaiting ``asyncio.wait`` is blocked in (as
a thread waiting on futures is). The truth: the program's own stamps of each wait."""

from __future__ import annotations

from pathlib import Path

from program_runs import run_both

import streamscope as ss


def test_a_task_waiting_on_its_tasks_is_not_busy(tmp_path: Path) -> None:
    out, truth, _ = run_both(tmp_path, "awaits.py")
    waits = truth["waits"]
    with ss.load(out) as run:
        t = run.table("worker")
        rows = [i for i in range(len(t["stage"])) if t["stage"][i] == "main"]
        assert len(rows) == 1, list(t["stage"])
        ns = {s: int(t[f"{s}_ns"][rows[0]]) for s in ("idle", "busy", "blocked_in", "blocked_out")}
    joined = waits["task_group"] + waits["gather"] + waits["task"]
    # Idle all the while it awaits its tasks' ends but for making the tasks (microseconds),
    # and once it is done; blocked in only inside asyncio.wait (1 ms: the trackers' and the
    # stamps' instants are taken a few calls apart); busy hardly at all.
    assert ns["idle"] >= 0.9 * joined, (ns, waits)
    assert 0.9 * waits["wait"] <= ns["blocked_in"] <= waits["wait"] + 1e6, (ns, waits)
    assert ns["busy"] <= 0.1 * truth["life"], (ns, truth)
