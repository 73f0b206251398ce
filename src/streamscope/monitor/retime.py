"""Re-timing a recorded run: every calibration of the run in, the affected frames recomputed.

In: a run file with its calibration bursts and the raw records of its clock domains. Out: the
frames of every target that crosses clock domains, recomputed with maps fitted to all the run's
bursts (interpolating between them, where the live monitor could only extrapolate), written back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.errors import RunFileError
from streamscope.core.records import RECORD_DTYPE
from streamscope.core.topology import HOST
from streamscope.monitor.engine import Engine
from streamscope.query.compile import compile_queries
from streamscope.store.reader import load
from streamscope.store.writer import replace_results
from streamscope.transport.wire import EXCHANGE_DTYPE, Message, MsgType


@dataclass(frozen=True, slots=True)
class Retimed:
    path: Path
    domains: tuple[str, ...]
    bursts: int
    records: int
    targets: tuple[tuple[int, str], ...]
    frames: int


def retime(path: str | Path, *, method: str = "hull") -> Retimed:
    """Refit every clock domain of the run at ``path`` and recompute its crossing targets.

    The run's queries were checked when it was recorded: one that matched nothing then (a
    program's, whose stages and queues appear as it runs: a default query for event loops it
    never had, or one the user wrote, of which the run warned at its end) has nothing to
    re-time, and is no error here."""
    p = Path(path)
    with load(p) as run:
        if run.status == "running":
            raise RunFileError(
                f"{p} is still being written (status running); retime it when it ends"
            )
        topology = run.topology
        # open world: each query matches what the run has, nothing more, and nothing is an
        # error (an app's queries all matched when its run started; a program's may not have)
        texts = [q.text for q in run.queries]
        plan = compile_queries(texts, topology, run.meta.frame_ns, open_world=True)
        plan = plan.sited(topology, trace=True)  # every record is in the file: all reduced here
        cal = run.table("calibration")
        raw = run.table("record")
        t0, duration, frame = run.meta.t0_host_ns, run.duration_ns or 0, run.meta.frame_ns
    crossing = topology.crossing_channels()
    # A virtual queue's frames rest on summaries its device reduced itself: nothing to redo.
    # A path's (latency(SRC ~> DST)) keep their bounds as measured: its end's records are not
    # kept whole.
    keys = tuple((q.id, t.name) for q, t in plan.measured if t.name in crossing)
    results: list[FrameResult] = []

    def sink(frames: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        results.extend(frames)

    engine = Engine(plan, topology, frame, sink, method=method)
    engine.handle(_msg(MsgType.START, 0, t0))
    domains, bursts = _calibrate(engine, cal)
    engine.final_map = True  # every burst is in: each record is placed at once, interpolated
    records = _records(raw)
    _replay(engine, records, frame, duration)
    engine.finish(duration)
    keep = set(keys)
    new = [r for r in results if (r.query_id, r.target) in keep]
    replace_results(p, keys, new)
    return Retimed(p, tuple(domains), bursts, len(records), keys, len(new))


def _calibrate(engine: Engine, cal: dict[str, np.ndarray]) -> tuple[list[str], int]:
    """Every burst of the run's ``calibration`` table into ``engine``, domain by domain."""
    index = {r.clock_domain: i for i, r in enumerate(engine.topology.resources)}
    domains = sorted({str(d) for d in cal["domain"].tolist()}) if len(cal["domain"]) else []
    bursts = 0
    for domain in domains:
        sel = cal["domain"] == domain
        for b in sorted(set(cal["burst"][sel].tolist())):
            rows_sel = sel & (cal["burst"] == b)
            rows = np.zeros(int(rows_sel.sum()), dtype=EXCHANGE_DTYPE)
            for col in ("t1_ns", "t2_ticks", "t3_ns"):
                rows[col] = cal[col][rows_sel]
            engine.handle(_msg(MsgType.CALIBRATION, index[domain], 0, rows))
            bursts += 1
    return domains, bursts


def _records(raw: dict[str, np.ndarray]) -> np.ndarray:
    """The run's kept raw records as the engine takes them."""
    n = len(raw["probe_id"]) if "probe_id" in raw else 0
    rec = np.zeros(n, dtype=RECORD_DTYPE)
    if n:
        for col, src in (("probe", "probe_id"), ("kind", "kind"), ("ticks", "ticks"),
                         ("value", "value")):  # fmt: skip
            rec[col] = raw[src]
    return rec


def _replay(engine: Engine, rec: np.ndarray, frame: int, duration: int) -> None:
    """Each domain's records as one agent's, a frame at a time, every domain's records of it,
    then that frame reduced: each frame's uncertainty is its own records' (not the whole
    run's widest)."""
    if not len(rec):
        return
    probe_domain = engine.topology.probe_domains()
    of = np.array([probe_domain.get(int(pid), HOST) for pid in rec["probe"].tolist()])
    parts: list[tuple[int, np.ndarray, np.ndarray]] = []
    for agent, domain in enumerate(sorted(set(of.tolist()))):
        engine.handle(_msg(MsgType.HELLO, agent, 0, info={"domain": domain}))
        part = rec[of == domain]
        part = part[np.argsort(part["ticks"], kind="stable")]
        t_ns, _ = engine.domains.to_ns_each(domain, part["ticks"].astype(np.int64))
        parts.append((agent, part, t_ns))
    first = min([0, *(int(t.min()) for _, _, t in parts if len(t))]) // frame * frame
    last = max([duration, *(int(t.max()) for _, _, t in parts if len(t))])
    for lo in range(first, last + frame, frame):
        for agent, part, t_ns in parts:
            sel = (t_ns >= lo) & (t_ns < lo + frame)
            if sel.any():
                chunk = part[sel]
                engine.handle(_msg(MsgType.BATCH, agent, int(chunk["ticks"][-1]), chunk))
        engine.advance(until=lo + frame)
    for agent, part, _ in parts:
        end = int(part["ticks"][-1]) if len(part) else 0
        engine.handle(_msg(MsgType.END, agent, end))


def _msg(
    mtype: MsgType,
    agent: int,
    watermark: int,
    records: np.ndarray | None = None,
    info: dict[str, object] | None = None,
) -> Message:
    rec = records if records is not None else np.zeros(0, dtype=RECORD_DTYPE)
    return Message(mtype, agent, 0, watermark, rec, dict(info or {}))
