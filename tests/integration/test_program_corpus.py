"""Programs written the way people write them, watched as they are (``examples/programs``).

Each runs plainly, then under ``streamscope run`` (real subprocesses, a cap on each: a hang
fails), and must print the same and end the same; its run must show every stage the program
has, distinct and named by the rule (given name, the program's function, the target, a place
in the flow), and name the stage that limits it, whose busy share must be the program's own
figure within 0.1, and the mean occupancy of its input queue the program's own within 10 % of
the queue's capacity. The program's own figures come from its stamps (``_stamps.py``), over
the frames inside its work window.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from program_corpus import CORPUS, Case, Ran, busy_in, run_both

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.analysis import findings
from streamscope.analysis.breakdown import stage_breakdown
from streamscope.analysis.context import BUSY_THRESHOLD, MOSTLY
from watched import cli

#: How far the run's figures may be from the program's own.
BUSY_TOLERANCE = 0.1
QUEUE_TOLERANCE = 0.1  # of the queue's capacity (unbounded: of the most it held)


def _query(run: ss.Run, prefix: str) -> int:
    (q,) = [q for q in run.queries if q.text.startswith(prefix)]
    return q.id


def _inside(run: ss.Run, frames: list[Any], window: list[float]) -> list[Any]:
    """The frames wholly inside a window of the program's monotonic clock."""
    t0 = run.meta.t0_host_ns
    lo, hi = window[0] - t0, window[1] - t0
    return [f for f in frames if f.t_start_ns >= lo and f.t_end_ns <= hi]


def _resolve(value: Any, topo: Any) -> Any:
    return value(topo) if callable(value) else value


def _busy(
    run: ss.Run, stage: str, window: list[float], stamps: Path | None = None, stamped: str = ""
) -> Any:
    """The stage's mean busy share over the whole frames inside ``window``; with ``stamps``
    (the program's stamps' directory), the program's own share of its stage ``stamped`` (the
    run's name for it by default) over those very frames too."""
    shares, spans = [], []
    t0 = run.meta.t0_host_ns
    for f in _inside(run, run.results(_query(run, "state("), stage), window):
        duty = f.point("duty")
        assert isinstance(duty, DutyPoint)
        if sum(duty.fractions) >= 0.99:
            shares.append(dict(zip(duty.labels, duty.fractions, strict=True))["busy"])
            spans.append((t0 + f.t_start_ns, t0 + f.t_end_ns))
    assert shares, f"{stage}: no frame inside its work window {window}"
    mean = sum(shares) / len(shares)
    if stamps is None:
        return mean
    own = busy_in(stamps, stamped or stage, spans)
    return mean, sum(own) / len(own)


def _occupancy(run: ss.Run, channel: str, window: list[float]) -> float:
    means = [
        float(p.value)
        for f in _inside(run, run.results(_query(run, "occupancy("), channel), window)
        for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
    ]
    assert means, f"{channel}: no frame inside the queue's window {window}"
    return sum(means) / len(means)


def check(ran: Ran) -> dict[str, float]:
    """Everything a corpus program's run must show; returns the figures compared."""
    case = ran.case
    assert ran.plain.returncode == 0, ran.plain.stderr[-3000:]
    assert ran.monitored.returncode == ran.plain.returncode, ran.monitored.stderr[-3000:]
    assert ran.monitored.stdout == ran.plain.stdout, "the program's own output changed"
    with ss.load(ran.run_file) as run:
        assert run.status == "completed", run.error
        topo = run.topology
        named = {_resolve(k, topo): v for k, v in case.named.items()}
        assert {s.name: s.named_by for s in topo.stages} == named
        ends = [(set(topo.producers(c)), set(topo.consumers(c))) for c in topo.channels]
        # every channel's every end a stage of the run (pypeln's task mode once named one
        # after a stage it never declared)
        assert {s for p, c in ends for s in p | c} <= set(named), (ends, named)
        for producers, consumers in case.shared:
            assert (set(producers), set(consumers)) in ends, (producers, consumers, ends)
        stage = _resolve(case.limiting, topo)
        # The program's own share over the very frames the run's is taken over (a pool whose
        # second worker starts later is not at work there yet, in either).
        window = _work_window(ran, case)
        busy, own_busy = _busy(run, stage, window, ran.stamps, case.stamped_stage)
        figures = {"own_busy": own_busy, "busy": busy}
        assert abs(busy - own_busy) <= BUSY_TOLERANCE, (stage, figures)
        if case.stamped_queue is not None:
            queue = ran.truth["queues"][case.stamped_queue]
            channels = _resolve(case.queues, topo)
            figures["own_queue"] = queue["mean"]
            figures["queue"] = sum(_occupancy(run, c, queue["window"]) for c in channels)
            scale = case.capacity or queue["max"]
            assert abs(figures["queue"] - queue["mean"]) <= QUEUE_TOLERANCE * scale, figures
        else:
            assert case.why, "a program whose queue is not stamped says why"
        for waiter in case.waits:
            figures[f"{waiter}_busy"] = _busy(run, waiter, window)
            assert figures[f"{waiter}_busy"] <= BUSY_TOLERANCE, (waiter, figures)
        found = findings(run)
        assert not contradictions(run, found), contradictions(run, found)
        tops = [f for f in found if f.kind == "bottleneck"]
        assert tops, [f.title for f in found]
        members = tops[0].evidence.get("members") or [tops[0].target]
        assert stage in members, tops[0].title
        # the default queries measure all the finding needs (a queue with no fixed capacity
        # out of the limiting stage once left it "not confirmed": how often it was empty)
        assert not tops[0].evidence.get("missing"), tops[0].detail
    return figures


def contradictions(run: ss.Run, found: list[Any]) -> list[str]:
    """Findings that say what their own figures deny: no bottleneck while a stage after the
    sources (one that some channel feeds, or none leaves) is busy past the threshold; a stage
    named rate-limiting that is neither that busy nor fed by a mostly full channel."""
    busy = {b.stage: b.busy for b in stage_breakdown(run) if b.busy is not None}
    topo = run.topology
    fed = {b for _, _, b in topo.links()}
    feeding = {a for _, a, _ in topo.links()}
    sources = feeding - fed
    out = []
    for f in found:
        if f.kind == "no_bottleneck":
            over = [s for s, b in busy.items() if b >= BUSY_THRESHOLD and s not in sources]
            if over:
                out.append(f"{f.title!r}, yet {over} are busy {BUSY_THRESHOLD:.0%} or more")
        if f.kind == "bottleneck":
            members = f.evidence.get("members") or [f.target]
            saturated = [m for m in members if busy.get(m, 0.0) >= BUSY_THRESHOLD]
            fed_full = (f.evidence.get("input_full_fraction") or 0.0) >= MOSTLY
            if not saturated and not fed_full and f.evidence.get("lock_cpu_share") is None:
                out.append(f"{f.title!r}, yet none of {members} is busy, nor fed full")
    return out


def _work_window(ran: Ran, case: Case) -> list[float]:
    """The limiting stage's working life by the program's stamps, its first and last tenth
    left out (it starts and drains there)."""
    lo, hi = ran.truth["stages"][case.stamped_stage]["window"]
    return [lo + (hi - lo) * 0.1, hi - (hi - lo) * 0.1]


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_a_program_as_people_write_it(case: Case, tmp_path: Path) -> None:
    check(run_both(case, tmp_path, cli()))


def test_a_program_passing_items_through_ray_is_said_to_be_unwatched(tmp_path: Path) -> None:
    """Two Ray actors around ``ray.util.queue.Queue(8)``: nothing streamscope watches; the run
    ends as the program does and says, at its end, in the run file and as a finding, that it
    saw no stage and no channel because the program used Ray."""
    case = Case("ray_actors.py", {}, "", "", (), None, 0, args=("100",), why="Ray")
    ran = run_both(case, tmp_path, cli())
    assert ran.plain.returncode == ran.monitored.returncode == 0, ran.monitored.stderr[-3000:]
    assert ran.monitored.stdout == ran.plain.stdout == "sum 4950\n"
    assert "no stage and no channel was seen" in " ".join(ran.monitored.stderr.split())
    with ss.load(ran.run_file) as run:
        assert not run.topology.stages and not run.topology.channels
        ((about, text),) = run.notes()
        assert about == "empty" and "Ray" in text
        (said,) = [f for f in findings(run) if f.kind == "nothing_seen"]
        assert "Ray" in said.detail
        assert not [f for f in findings(run) if f.kind in ("bottleneck", "missing_queries")]


def test_show_says_how_each_stage_was_named(tmp_path: Path) -> None:
    """``streamscope show`` lists a program's stages, their workers and how each name was
    found."""
    case = next(c for c in CORPUS if c.program == "process_workers.py")
    ran = run_both(case, tmp_path, cli())
    shown = subprocess.run(
        [*cli(), "show", str(ran.run_file)], capture_output=True, text=True, timeout=60,
        check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout[shown.stdout.index("stages") : shown.stdout.index("pipeline")]
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    assert "2" in rows["compress"] and "the name the program gave" in rows["compress"]
    assert "the program's function its workers run" in rows["read"]
    assert "the program's main thread" in rows["main"]


def test_joblib_workers_are_the_function_they_run(tmp_path: Path) -> None:
    """joblib's ``Parallel`` on loky (its default backend) starts its workers by pickling them
    with cloudpickle: they start under the monitor as plainly, are the stage of the program's
    function they run (busy as the program's own stamps say), loky's own threads and queues
    are no stages (its call and result queues are channels to and from them), and its resource
    tracker, which ends on its own once the program has, is not said to outlive it."""
    # (Each item also costs a worker loky's own work around it, pickling and passing results:
    # busy, not in the program's stamps; 30 ms items keep it a few percent beside a busy core.)
    case = Case("joblib_parallel.py", {}, "score", "score", (), None, 0, args=("80",), why="loky")
    ran = run_both(case, tmp_path, cli())
    assert ran.plain.returncode == ran.monitored.returncode == 0, ran.monitored.stderr[-3000:]
    assert ran.monitored.stdout == ran.plain.stdout == "total 167480\n"
    with ss.load(ran.run_file) as run:
        assert run.status == "completed", run.error
        named = {s.name: s.named_by for s in run.topology.stages}
        assert named == {"main": "main", "score": "function"}, named
        # loky's call queue and result queue (the generator's results) are channels between
        # the program's main thread and its function's workers, as a process pool's are
        topo = run.topology
        ends = {(tuple(topo.producers(c)), tuple(topo.consumers(c))) for c in topo.channels}
        assert ends == {(("main",), ("score",)), (("score",), ("main",))}, ends
        assert not [n for n in run.notes() if n[0] == "outlived"], run.notes()
        window = _work_window(ran, case)
        busy, own = _busy(run, "score", window, ran.stamps)
        assert abs(busy - own) <= BUSY_TOLERANCE, (busy, own)
        # The main thread takes the results as they come: joblib polls its jobs and sleeps
        # between looks, waiting for its workers, not working.
        assert _busy(run, "main", window) < 1 - BUSY_TOLERANCE
        found = findings(run)
        assert not contradictions(run, found), contradictions(run, found)
        (top,) = [f for f in found if f.kind == "bottleneck"]
        assert top.target == "score", top.title


def test_the_stamps_load_nothing_the_program_did_not(tmp_path: Path) -> None:
    """A stamp takes its time and writes a line: where it imported asyncio to ask for the
    current task, a pool worker's first stamp cost it 25 ms (100 ms beside busy cores) that
    its stamps showed as a gap in its work and the run as busy."""
    from program_corpus import PROGRAMS

    code = (
        "import sys, _stamps\n"
        "with _stamps.work('s'):\n    pass\n"
        "print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))\n"
    )
    env = {**os.environ, "PROGRAM_STAMPS": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=PROGRAMS, check=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.stdout == "[]\n", out.stdout
    assert len((next(tmp_path.glob("stamps-*.txt"))).read_text().splitlines()) == 1
