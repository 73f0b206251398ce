"""What a monitored program's own process carries: the probes, not the monitor's libraries."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracles import is_monitor
from streamscope.monitor import PROCESS_NAME
from streamscope.report.plain import FORCING
from streamscope.store.run import SETUP
from watched import cli

APPS = Path(__file__).parent / "apps"


def test_a_watched_programs_process_loads_none_of_the_monitors_libraries(tmp_path: Path) -> None:
    """The program's process under ``streamscope run`` imports the probes only: no numpy,
    DuckDB, rich or the query modules (numpy alone was 50 ms of its start), and no asyncio for
    a program that does not use it (asyncio's are patched once it is imported: 25 ms more),
    while its threads and queue are watched all the same."""
    plain = subprocess.run([sys.executable, str(APPS / "light.py")], capture_output=True,
                           text=True, timeout=60, check=True)  # fmt: skip
    assert plain.stdout.strip() == "[]"
    out = tmp_path / "run.duckdb"
    ran = subprocess.run([*cli(), "run", str(APPS / "light.py"), "-o", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "[]", ran.stdout
    shown = subprocess.run([*cli(), "show", str(out)], capture_output=True, text=True,
                           timeout=60, check=True)  # fmt: skip
    assert "work" in shown.stdout and "->" in shown.stdout, shown.stdout


def test_the_command_reads_nothing_back_of_a_run_its_monitor_said(tmp_path: Path) -> None:
    """``streamscope run`` of a program: the monitor process writes the run's summary and
    findings for the command, which then loads neither numpy nor DuckDB (their imports and
    the reading were 0.2 s of its CPU), and prints them. Asked no queries and writing to no
    terminal, it loads neither the query parser nor rich (their imports and the defaults'
    parsing were some 40 ms of its start)."""
    out, loaded_by = tmp_path / "run.duckdb", tmp_path / "modules"
    env = {k: v for k, v in os.environ.items() if k not in FORCING}
    # The command as its script runs it, telling at its exit what it loaded (its monitor,
    # forked from it, drops the command's exit handlers)
    command = (f"import atexit, sys; atexit.register(lambda: open({str(loaded_by)!r}, 'w')"
               ".write(chr(10).join(sys.modules))); from streamscope.cli import entry; "
               f"sys.argv = ['streamscope', 'run', {str(APPS / 'light.py')!r}, '-o', "
               f"{str(out)!r}, '--quiet']; entry()")  # fmt: skip
    ran = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True,
                         timeout=120, check=False, cwd=tmp_path, stdin=subprocess.DEVNULL,
                         env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    loaded = set(loaded_by.read_text().split())
    assert "streamscope.runtime.program" in loaded  # (the command's own imports, as read)
    assert not {"numpy", "duckdb", "_duckdb", "streamscope.store.reader"} & loaded
    assert not {"rich", "rich.console", "lark", "streamscope.query.parser"} & loaded
    assert "summary of light (completed)" in ran.stderr and "findings" in ran.stderr
    assert f"run file: {out}" in ran.stderr


def test_a_run_file_is_read_and_written_with_the_engine_alone(tmp_path: Path) -> None:
    """What reads and writes run files loads DuckDB's engine module, not the ``duckdb``
    package around it (60-90 ms more of every monitor's start and of ``show``), the native
    probe core does not load its pure-Python twin, and a monitor loads the virtual queues'
    estimation only for a run that has one."""
    import streamscope as ss

    out = tmp_path / "run.duckdb"
    ran = subprocess.run([*cli(), "run", str(APPS / "light.py"), "-o", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    probe = (
        "import sys\nimport streamscope as ss, streamscope.store.writer, streamscope.monitor.service\n"
        f"with ss.load({str(out)!r}) as run: n = len(run.topology.channels)\n"
        "import streamscope.core.native as native\n"
        "print(n, 'duckdb' in sys.modules, '_duckdb' in sys.modules, native.IMPLEMENTATION,"
        " 'streamscope.core._twin' in sys.modules, 'streamscope.monitor.virtual' in sys.modules)\n"
    )
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()  # fmt: skip
    assert got == ["2", "False", "True", "native", "False", "False"], got
    with ss.load(out) as run:
        assert run.status == "completed"


SIBLINGS = """\
import os, queue, sys, threading
q = queue.Queue(4)
def take():
    for _ in range(3): q.get()
t = threading.Thread(target=take); t.start()
for i in range(3): q.put(i)
t.join()
# the processes beside this one, started by the same command: their command lines
mine = os.getppid()
for pid in os.listdir("/proc"):
    try:
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        if pid.isdigit() and int(stat[1]) == mine and int(pid) != os.getpid():
            comm = open(f"/proc/{pid}/comm").read().strip()
            print(comm, "|", open(f"/proc/{pid}/cmdline").read().replace("\\0", " ").strip())
    except OSError:
        pass
"""


def test_the_monitor_is_started_ahead_and_the_run_is_watched_by_it(tmp_path: Path) -> None:
    """``streamscope run`` starts its monitor process before it loads its commands, forked
    once it has loaded what both load (its own imports go on beside the command's): the
    monitor beside the program is the one started so, and the run it wrote holds the
    program's stage and channel."""
    import streamscope as ss

    prog, out = tmp_path / "siblings.py", tmp_path / "run.duckdb"
    prog.write_text(SIBLINGS)
    ran = subprocess.run([*cli(), "run", str(prog), "-o", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    # the command's own fork (its command line the command's), named the monitor
    monitors = [line for line in ran.stdout.splitlines() if line.startswith(PROCESS_NAME)]
    assert len(monitors) == 1 and f"run {prog}" in monitors[0], ran.stdout
    with ss.load(out) as run:
        assert run.status == "completed"
        assert [c.name for c in run.topology.channels] == ["main -> take"], run.topology


def test_a_monitor_started_ahead_and_not_needed_ends(tmp_path: Path) -> None:
    """A run refused before it starts (no such file): the monitor started ahead reads that it
    is let go and ends, leaving no process behind; the command says what was wrong."""
    import psutil

    with subprocess.Popen([*cli(), "run", str(tmp_path / "missing.py"), "-o",
                           str(tmp_path / "run.duckdb")], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL) as cmd:  # fmt: skip
        # its own monitor, started ahead by this command, seen while the command lives
        found: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            command = psutil.Process(cmd.pid)
            while not found and cmd.poll() is None:
                found = [p for p in command.children() if is_monitor(p)]
                time.sleep(0.005)
        _, err = cmd.communicate(timeout=120)
    assert cmd.returncode == 2 and "does not exist" in err, err
    assert found, "no monitor was started ahead"
    assert not (tmp_path / "run.duckdb").exists()
    psutil.wait_procs(found, timeout=60)  # a guard: it ends as soon as its imports are done
    assert not [p for p in found if p.is_running() and p.status() != "zombie"], found


def test_the_overhead_counts_the_time_sampled_in_streamscopes_own_code(tmp_path: Path) -> None:
    """A program of 200 threads with a queue each: the time its threads' sampled stacks found
    in streamscope's own code (its queues' and threads' wrappers, its probes) is in the
    overhead it reports, where the probes' per-event estimate alone said a few percent of
    what monitoring added (1.35 % against 70 % at 500 threads, by the program's own clock).
    Each stage's figure is the samples' own sum (read back from the stacks table here), the
    larger of it and the estimate is its cost, and the run's line says so."""
    import streamscope as ss

    out, program = tmp_path / "run.duckdb", tmp_path / "many_queues.py"
    program.write_text(_bench_program())
    ran = subprocess.run([*cli(), "run", str(program), "-o", str(out), "--",
                          "200", str(tmp_path / "window")], capture_output=True, text=True,
                         timeout=300, check=False, cwd=tmp_path, stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    with ss.load(out) as run:
        rows = {r["stage"]: r for r in run.overhead()}
        _, sampled = run.sql("SELECT stage, stack, ns FROM stacks WHERE state IN "
                             "('running', 'waiting')")  # fmt: skip
        worked = run.worked_ns
        _, wall = run.sql("SELECT wall_ns FROM machine WHERE host = 'main'")
    assert worked == wall[0][0] and worked > 0  # the program's time, not the monitor's too
    own: dict[str, float] = {}
    for stage, stack, ns in sampled:
        if stack.split(";")[-1] == "(streamscope)":
            own[stage] = own.get(stage, 0.0) + ns
    assert own, "no sample found streamscope's own code"
    for stage, r in rows.items():
        assert r["own_code_ns"] == pytest.approx(own.get(stage, 0.0))
        assert r["cost_ns"] == max(r["est_probe_ns"], r["own_code_ns"])
        assert r["fraction"] == pytest.approx(r["cost_ns"] / worked)
    stages = [r for stage, r in rows.items() if stage != SETUP]  # the setup's: measured
    cost, probes = sum(r["cost_ns"] for r in stages), sum(r["est_probe_ns"] for r in stages)
    assert cost > 2 * probes, (cost, probes)  # the wrappers cost more than the probes
    said = " ".join(ran.stderr.split())  # as one line, whatever the width it was wrapped at
    assert re.search(r"monitoring overhead: [^\n]* in its own code in the program's threads "
                     r"\(sampled\), [^,]* making its threads workers and its queues channels, "
                     r"[\d.]+ % of the [\d.]+ ?[µmun]?s it ran", said), said  # fmt: skip


def _bench_program() -> str:
    """``benchmarks/bench_threads.py``'s program: N threads, a ``queue.Queue`` each."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location("bench_threads", bench / "bench_threads.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(bench))
    return str(module.PROGRAM)


#: A script that watches ``apps/two_stages.py``'s code inside ``ss.watch()`` and says what it saw.
WATCHED = (
    "import json, queue, sys\nimport streamscope as ss\nfrom streamscope.store.run import Run\n"
    "standard = queue.Queue\nwith ss.watch() as session:\n"
    "    recorded = queue.Queue is not standard\n"
    + "".join(f"    {ln}\n" for ln in (APPS / "two_stages.py").read_text().splitlines())
    + """with Run.from_memory(session.result.store) as run:
    _, busy = run.sql("SELECT avg(value) FROM stat WHERE target = 'work' AND stat = 'duty.busy'")
    json.dump({"recorded": recorded, "restored": queue.Queue is standard,
               "status": str(run.status), "stages": sorted(s.name for s in run.topology.stages),
               "channels": sorted(c.name for c in run.topology.channels), "busy": busy[0][0],
               "html": session.result._repr_html_()[:40]}, sys.stdout)
"""
)


def test_watch_in_process_sees_plain_threads_and_queues(tmp_path: Path) -> None:
    """A script that puts ``ss.watch()`` around code as it is written (``queue.Queue`` and
    ``threading.Thread``, nothing of streamscope's): its stages and channels are found as
    ``streamscope run`` finds a program's, the slow stage is busy, the standard classes are
    the standard ones again once the block ends, and the result shows as HTML in a notebook.
    (In a script of its own: the block watches everything its process makes meanwhile, and a
    test runner's own threads and queues are not the script's.)"""
    (tmp_path / "watched.py").write_text(WATCHED)
    ran = subprocess.run([sys.executable, "watched.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    got = json.loads(ran.stdout)
    assert got["recorded"] and got["restored"], got
    assert got["status"] == "completed", got
    assert got["stages"] == ["main", "sink", "work"], got
    assert got["channels"] == ["main -> work", "work -> sink"], got
    assert got["busy"] > 0.5, got  # it sleeps 2 ms an item: busy, the others wait on it
    assert got["html"].startswith('<div class="ss-nb">'), got


ASYNCIO_BEFORE = """\
import asyncio, json
import streamscope as ss
standard = (asyncio.Queue, asyncio.Task, asyncio.wait)
with ss.watch():
    inside = [asyncio.Queue is not standard[0], asyncio.Task is not standard[1],
              asyncio.wait is not standard[2]]
after = [asyncio.Queue is standard[0], asyncio.Task is standard[1], asyncio.wait is standard[2]]
print(json.dumps({"inside": inside, "after": after}))
"""
ASYNCIO_AFTER = """\
import json, sys
from streamscope.pipeline.program import auto
auto.install()
loaded = "asyncio" in sys.modules
import asyncio
inside = [asyncio.Queue.__name__, asyncio.Task.__name__, hasattr(asyncio.wait, "__wrapped__")]
auto.uninstall()
after = [asyncio.Queue.__name__, asyncio.Task.__name__, hasattr(asyncio.wait, "__wrapped__")]
print(json.dumps({"loaded": loaded, "inside": inside, "after": after}))
"""


def test_asyncio_is_patched_whenever_it_is_imported_and_put_back(tmp_path: Path) -> None:
    """asyncio's queues, tasks and waits are the watched ones while a session is installed,
    whether the program imported asyncio before (``ss.watch`` in a notebook, whose kernel
    runs on it) or imports it after (not loaded until then); the standard ones once it ends."""

    def ran(script: str) -> dict[str, object]:
        (tmp_path / "aio.py").write_text(script)
        done = subprocess.run([sys.executable, "aio.py"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        got: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
        return got

    assert ran(ASYNCIO_BEFORE) == {"inside": [True] * 3, "after": [True] * 3}
    after = ran(ASYNCIO_AFTER)
    assert after["loaded"] is False
    assert after["inside"] == ["AutoAsyncQueue", "AutoTask", True], after
    assert after["after"] == ["Queue", "Task", False], after
