"""Running a test's unmodified program plainly and under ``streamscope run``, and reading a
run's figures the way its tests compare them with the program's own (``test_programs``,
``test_program_pools``, ``test_program_ends``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from watched import cli

APPS = Path(__file__).parent / "apps"


def run_watched(prog: Path, out: Path, *args: str, frame: str = "") -> str:
    """``streamscope run PROG -o OUT --quiet [--frame FRAME] -- ARGS`` in a subprocess, which
    must end with status 0; its stderr."""
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet",
         *(["--frame", frame] if frame else []), "--", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def run_both(tmp: Path, program: str, *args: str, beside: bool = False) -> tuple[Path, dict, str]:  # type: ignore[type-arg]
    """The program plain, then under ``streamscope run`` with no query: (run file, the
    monitored run's own truth, its stderr); both stdouts must be equal. ``beside``: the plain
    run goes on while the monitored one runs, for a program whose work only waits (it takes
    next to no CPU from the monitored run, and its own output does not depend on timing)."""
    plain = subprocess.Popen(
        [sys.executable, str(APPS / program), *args, str(tmp / "plain.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if not beside:
        plain_out, plain_err = plain.communicate(timeout=300)
        assert plain.returncode == 0, plain_err[-3000:]
    out, truth = tmp / "run.duckdb", tmp / "truth.json"
    proc = subprocess.run(
        [*cli(), "run", str(APPS / program), "-o", str(out), "--quiet", "--frame", "200ms", "--",
         *args, str(truth)],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if beside:
        plain_out, plain_err = plain.communicate(timeout=300)
        assert plain.returncode == 0, plain_err[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == plain_out, "the program's own output changed"
    assert "summary of" in proc.stderr  # streamscope speaks on stderr
    return out, json.loads(truth.read_text()), proc.stderr


def query_id(run: ss.Run, prefix: str) -> int:
    (q,) = [q for q in run.queries if q.text.startswith(prefix)]
    return q.id


def busy_share(run: ss.Run, stage: str, window: tuple[int, int] | None = None) -> float:
    """The stage's busy fraction over the frames it was working all through: frames whose time
    it accounts for whole (not those before it started), its first and last left out (they
    hold its start and end); with ``window`` (the program's own stamps of its working life,
    monotonic ns), only the frames wholly inside it."""
    shares = []
    t0 = run.meta.t0_host_ns
    for f in run.results(query_id(run, "state("), stage):
        duty = f.point("duty")
        assert isinstance(duty, DutyPoint)
        inside = window is None or (window[0] <= t0 + f.t_start_ns and t0 + f.t_end_ns <= window[1])
        if sum(duty.fractions) >= 0.99 and inside:
            shares.append(dict(zip(duty.labels, duty.fractions, strict=True))["busy"])
    shares = shares[1:-1] if window is None else shares
    assert shares, f"{stage}: too few frames"
    return sum(shares) / len(shares)


def worker_shares(run: ss.Run, stage: str) -> list[tuple[str, float]]:
    """Each worker of ``stage`` (table ``worker``): its resource and busy share of its known
    time."""
    t = run.table("worker")
    out = []
    for i in range(len(t["stage"])):
        if t["stage"][i] != stage:
            continue
        known = sum(int(t[f"{s}_ns"][i]) for s in ("idle", "busy", "blocked_in", "blocked_out"))
        out.append((str(t["resource"][i]), int(t["busy_ns"][i]) / known))
    return out


def occupancy(run: ss.Run, channel: str, stat: str) -> list[float]:
    return [
        float(p.value) for f in run.results(query_id(run, "occupancy("), channel) for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == stat and p.value is not None
    ]  # fmt: skip


__all__ = [
    "APPS", "busy_share", "occupancy", "query_id", "run_both", "run_watched", "worker_shares",
]  # fmt: skip
