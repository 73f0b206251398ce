"""The corpus of programs written the way people write them (``examples/programs``), what each
must show, and how to run one plainly and under ``streamscope run`` and compare the two with the
program's own stamps. Shared by the corpus test and its benchmark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRAMS = Path(__file__).resolve().parents[2] / "examples" / "programs"
sys.path.insert(0, str(PROGRAMS))
from _stamps import busy_in, truth  # noqa: E402  (the programs' own module, not an installed one)

#: A run that takes longer than this is a hang (the programs take 1-2 s plainly, with the
#: items the cases give them).
CAP_S = 120


@dataclass(frozen=True)
class Case:
    """One program and what its run must show: its stages and how each is named
    (``named``: a name, or a callable of the topology for names by place), the stage that
    limits it (its name in the run; in the program's stamps), the channels in front of it
    (their name in the run; the queue's in the stamps, None where the queue is a library's
    the program cannot stamp) and their capacity in items (0: unbounded). Names may be
    callables of the run's topology."""

    program: str
    named: dict[str, str]
    limiting: str | Callable[[Any], str]
    stamped_stage: str
    queues: tuple[str, ...] | Callable[[Any], tuple[str, ...]]
    stamped_queue: str | None
    capacity: int
    args: tuple[str, ...] = ()
    why: str = ""
    #: Channels that must be there, each as its producers and consumers (a fan-in's name is
    #: after whichever producer put first, so it is found by its ends).
    shared: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    #: Stages that only wait on the others while the limiting one works (a main thread in a
    #: pool's ``map``, a join, a task group's end): never busy there.
    waits: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.program.removesuffix(".py")


CORPUS = (
    Case(
        "shared_worker.py",
        {
            "feed": "function",
            "decode": "function",
            "resize": "function",
            "encode": "function",
            "main": "main",
        },
        "resize",
        "resize",
        ("decode -> resize",),
        "decode -> resize",
        8,
        args=("300",),
    ),
    Case(
        "generic_stage.py",
        {
            "feed": "function",
            "load": "function",
            "parse": "function",
            "score": "function",
            "main": "main",
        },
        "parse",
        "parse",
        ("load -> parse",),
        "queue 1",
        10,
        args=("250",),
    ),
    Case(
        "pypeln_thread.py",
        {
            "FromIterable": "target",
            "download": "function",
            "resize": "function",
            "keep": "function",
            "main": "main",
        },
        "resize",
        "resize",
        ("download -> resize",),
        "download -> resize",
        20,
        args=("350",),
    ),
    Case(
        "pypeln_process.py",
        {
            "FromIterable": "target",
            "download": "function",
            "resize": "function",
            "keep": "function",
            "main": "main",
        },
        "resize",
        "resize",
        ("download -> resize",),
        "download -> resize",
        20,
        args=("60",),
    ),
    Case(
        "pypeln_task.py",
        {
            "IterableQueue": "target",
            "FromIterable": "target",
            "fetch_page": "function",
            "fetch_details": "function",
            "main": "main",
        },
        "fetch_details",
        "fetch_details",
        ("fetch_page -> fetch_details",),
        "fetch_page -> fetch_details",
        40,
        args=("200",),
    ),
    Case(
        "executor_queue.py",
        {"main": "main", "produce": "function", "consume": "function"},
        "consume",
        "consume",
        ("produce -> consume",),
        "produce -> consume",
        16,
        args=("360",),
    ),
    Case(
        "pool_imap.py",
        {"main": "main", "parse": "function", "enrich": "function"},
        "main",
        "main",
        ("enrich -> main",),
        "enrich -> main",
        0,
        args=("250",),
    ),
    Case(
        "mpire_map.py",
        {"main": "main", "transform": "function", "WorkerPool._results_handler": "target"},
        "transform",
        "transform",
        ("main -> transform", "main -> transform #2"),
        None,
        0,
        why="mpire's task queues are its own: the program cannot stamp them",
        args=("400",),
        waits=("main",),
    ),
    Case(
        "dataloader.py",
        {"main": "main", "_worker_loop": "function", "_pin_memory_loop": "function"},
        "_worker_loop",
        "load",
        ("main -> _worker_loop", "main -> _worker_loop #2"),
        "index queues",
        4,  # two outstanding samples a worker: the loader's own bound
        args=("250",),
    ),
    Case(
        "asyncio_workers.py",
        {"main": "function", "worker": "function"},
        "worker",
        "worker",
        ("main -> worker",),
        "producer -> worker",
        10,
        args=("500",),
    ),
    Case(
        "fan_in.py",
        {"fast": "function", "slow": "function", "sink": "function"},
        "sink",
        "sink",
        lambda topo: tuple(c.name for c in topo.channels if c.dst == "sink"),
        "fast, slow -> sink",
        16,
        args=("300",),
        shared=((("fast", "slow"), ("sink",)),),
    ),
    Case(
        "joinable_workers.py",
        {"worker": "function", "main": "main"},
        "worker",
        "worker",
        ("main -> worker",),
        "tasks",
        8,
        args=("150",),
        waits=("main",),
    ),
    Case(
        "apply_callbacks.py",
        {"main": "main", "cube": "function", "collect": "function"},
        "cube",
        "cube",
        ("main -> cube",),
        None,
        0,
        args=("150",),
        why="the pool's task queue is its own: the program cannot stamp it",
        shared=((("cube",), ("collect",)),),
    ),
    Case(
        "executor_map.py",
        {"main": "main", "square": "function"},
        "square",
        "square",
        ("main -> square",),
        None,
        0,
        args=("150",),
        why="the executor's call queue is its own: the program cannot stamp it",
        shared=((("main",), ("square",)), (("square",), ("main",))),
        waits=("main",),
    ),
    Case(
        "priority_queue.py",
        {"schedule": "function", "worker": "function", "write": "function"},
        "worker",
        "worker",
        ("schedule -> worker",),
        "schedule -> worker",
        16,
        args=("300",),
        shared=((("worker",), ("write",)),),
    ),
    Case(
        "stream_nodes.py",
        {"main": "function", "fetch": "function", "parse": "function", "list.append": "target"},
        "parse",
        "parse",
        ("fetch -> parse",),
        None,
        0,
        args=("300",),
        why="streamz hands an item to the next node by calling it: no queue holds it",
        shared=((("main",), ("fetch",)), (("parse",), ("list.append",))),
        waits=("main",),
    ),
    Case(
        "stream_sync.py",
        {"main": "main", "slow": "function", "even": "function", "list.append": "target"},
        "slow",
        "slow",
        ("main -> slow",),
        None,
        0,
        args=("200",),
        why="streamz hands an item to the next node by calling it: no queue holds it",
        shared=((("slow",), ("even",)), (("even",), ("list.append",))),
        waits=("main",),
    ),
    Case(
        "task_group.py",
        {"main": "function", "produce": "function", "consume": "function"},
        "consume",
        "consume",
        ("produce -> consume",),
        "produce -> consume",
        12,
        args=("400",),
        waits=("main",),
    ),
    Case(
        "etl_chunks.py",
        {"main": "main", "transform": "function"},
        "transform",
        "transform",
        ("main -> transform",),
        None,
        0,
        args=("150",),
        why="the executor's work queue is its own: the program cannot stamp it",
        shared=((("main",), ("transform",)),),
    ),
    Case(
        "futures_window.py",
        {"main": "main", "crunch": "function"},
        "crunch",
        "crunch",
        ("main -> crunch",),
        None,
        0,
        args=("150",),
        why="the executor's call queue is its own: the program cannot stamp it",
        shared=((("main",), ("crunch",)), (("crunch",), ("main",))),
        waits=("main",),
    ),
    Case(
        "tcp_service.py",
        {"main": "function", "client": "function", "handle": "function"},
        "handle",
        "handle",
        (),
        None,
        0,
        args=("300",),
        why="its requests go over sockets, through no queue",
        waits=("client",),
    ),
    Case(
        "process_workers.py",
        {"read": "function", "compress": "given", "main": "main"},
        "compress",
        "compress",
        ("read -> compress",),
        "read -> compress",
        12,
        args=("90",),
    ),
)


@dataclass
class Ran:
    """One program run plainly and monitored: their outputs, the monitored run's file, the
    program's own stamps of that run and how long both took."""

    case: Case
    plain: subprocess.CompletedProcess[str]
    monitored: subprocess.CompletedProcess[str]
    run_file: Path
    truth: dict[str, Any]
    wall_s: dict[str, float] = field(default_factory=dict)
    #: Where the monitored run's stamps are (``_stamps.busy_in`` reads them).
    stamps: Path | None = None


def _start(cmd: list[str], stamps: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PROGRAM_STAMPS": str(stamps)}
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _end(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=CAP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} did not end within {CAP_S} s: {err[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_both(case: Case, tmp: Path, cli: list[str], frame: str = "100ms") -> Ran:
    """``python PROGRAM`` and ``streamscope run PROGRAM`` side by side (each compared with its
    own stamps, so what one takes from the other shows in both); a run that has not ended
    after ``CAP_S`` is a hang and fails."""
    prog = PROGRAMS / case.program
    plain_dir, mon_dir = tmp / "plain", tmp / "monitored"
    plain_dir.mkdir()
    mon_dir.mkdir()
    run_file = tmp / f"{case.name}.duckdb"
    cmd = [*cli, "run", str(prog), "-o", str(run_file), "--quiet", "--frame", frame]
    t = time.perf_counter()
    started = _start([sys.executable, str(prog), *case.args], plain_dir, tmp)
    monitored = _end(_start([*cmd, "--", *case.args], mon_dir, tmp))
    plain = _end(started)
    own_mon = truth(mon_dir)
    walls = {"both_s": time.perf_counter() - t}
    return Ran(case, plain, monitored, run_file, own_mon, walls, mon_dir)


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="streamscope-corpus-"))


__all__ = ["CAP_S", "CORPUS", "PROGRAMS", "Case", "Ran", "busy_in", "run_both", "scratch"]
