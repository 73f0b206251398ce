"""Export rate: a traced run of 1e6 raw records to Perfetto, OTF2 and Chrome JSON, beside peers.

In: a run file made by a tiny real traced pipeline, whose ``record`` table is then replaced by
1e6 (``--quick``: 1e5) synthetic records inserted with DuckDB: a third insertions and a third
removals on ``src -> work`` (FIFO, occupancy 0..4), a third state changes of ``work``. Out: per
format, raw records exported per second (load + timeline + write, the whole ``export_run``)
and the same for building the timeline alone; the peers write as many rows in this process
with ``json.dumps`` of a list of dicts (to a file) and with ``np.save``. Ratios are per round.

    python benchmarks/bench_export.py [--quick] [--reps N]
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import streamscope as ss
from _harness import fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.export import export_run
from streamscope.export.timeline import build_timeline

TARGET_EVENTS_PER_S = 1e6  # Perfetto and Chrome; OTF2's writer is one call per event
GAP_NS = 1000


def make_run(path: Path, n: int) -> int:
    """A real traced run at ``path`` whose ``record`` table holds ``n`` synthetic records
    instead (about n/3 items through ``src -> work``, n/3 state changes). Returns n."""
    p = ss.Pipeline("bench_export")
    p.add("src", range(50))
    p.add("work", lambda x: x)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=4)
    queries = ["state(work): duty every 100ms", "occupancy(src -> work): mean every 100ms"]
    res = ss.run(p, queries, ss.RunOptions(out=path, mode="inline", trace=True))
    if res.status != "completed":
        raise RuntimeError(f"the seed run failed: {res.error}")
    with ss.load(path) as run:
        t0 = run.meta.t0_host_ns
        ids = {(pr.kind, pr.target): pr.id for pr in run.topology.probes}
    m = n // 3
    tail, head, state = ids["tail", "src -> work"], ids["head", "src -> work"], ids["state", "work"]
    con = duckdb.connect(str(path))
    try:
        con.execute("DELETE FROM record")
        # item i enters at i*GAP, leaves 3.5 gaps later (occupancy 3..4); work turns busy at
        # each removal and idle half a gap later
        con.execute(
            f"INSERT INTO record SELECT {tail}, 1, {t0} + i * {GAP_NS}, i FROM range(1, {m + 1}) t(i)"
        )
        con.execute(
            f"INSERT INTO record SELECT {head}, 2, {t0} + i * {GAP_NS} + {7 * GAP_NS // 2}, i "
            f"FROM range(1, {m + 1}) t(i)"
        )
        con.execute(
            f"INSERT INTO record SELECT {state}, 3, {t0} + i * {GAP_NS // 2} + 3500, i % 2 "
            f"FROM range(1, {n - 2 * m + 1}) t(i)"
        )
        con.execute(f"UPDATE run SET duration_ns = {(m + 10) * GAP_NS}")
        got = con.execute("SELECT count(*) FROM record").fetchone()
    finally:
        con.close()
    if got is None or got[0] != n:
        raise RuntimeError(f"inserted {got} records, not {n}")
    return n


def main() -> int:
    args = parse_args(__doc__ or "")
    n = 100_000 if args.quick else 1_000_000
    reps = args.reps or (1 if args.quick else 3)
    work = Path(tempfile.mkdtemp(prefix=f"bench_export_{os.getpid()}_"))
    run_path = work / "run.duckdb"
    make_run(run_path, n)
    with ss.load(run_path) as run:
        tl = build_timeline(run)
    if len(tl.instants) != n:
        raise RuntimeError(f"the timeline has {len(tl.instants)} raw events, not {n}")
    rows = np.column_stack(
        [tl.instants.t_ns, tl.instants.kind, tl.instants.value, tl.instants.probe]
    )

    def timed(fn: object) -> tuple[float]:
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        return (time.perf_counter() - t,)

    def timeline() -> tuple[float]:
        def go() -> None:
            with ss.load(run_path) as r:
                build_timeline(r)

        return timed(go)

    def fmt(name: str, out: str) -> tuple[str, object]:
        return name, lambda: timed(lambda: export_run(run_path, name, work / out))

    def peer_json() -> tuple[float]:
        def go() -> None:
            keys = ("ts", "kind", "value", "probe")
            data = [dict(zip(keys, r, strict=True)) for r in rows.tolist()]
            (work / "peer.json").write_text(json.dumps(data))

        return timed(go)

    def peer_npy() -> tuple[float]:
        return timed(lambda: np.save(work / "peer.npy", rows))

    variants = [
        ("timeline", timeline),
        fmt("perfetto", "t.pftrace"),
        fmt("chrome", "t.json"),
        fmt("otf2", "t.otf2"),
        ("json.dumps", peer_json),
        ("np.save", peer_npy),
    ]
    (wall,) = interleave(variants, reps)  # type: ignore[arg-type]
    by = {s.name: s for s in wall}
    head = ["variant", "median s", "spread", "events/s", "x json.dumps (rate)", "x np.save (rate)"]
    body = []
    for s in wall:
        rj = paired_ratios(by["json.dumps"], s)
        rn = paired_ratios(by["np.save"], s)
        body.append(
            [
                s.name,
                f"{s.median:.3f}",
                fmt_spread(s),
                f"{n / s.median:,.0f}",
                f"{rj.median:.2f}x",
                f"{rn.median:.3f}x",
            ]
        )
    print(f"export of {n:,} traced raw records ({len(tl.slices):,} state slices, "
          f"{tl.n_counter_samples:,} counter samples); {machine()}")  # fmt: skip
    print(table(head, body))
    size = {f: (work / p) for f, p in (("perfetto", "t.pftrace"), ("chrome", "t.json"))}
    print(
        "file sizes: " + ", ".join(f"{f} {p.stat().st_size / 1e6:.1f} MB" for f, p in size.items())
    )
    for f in ("perfetto", "chrome", "otf2"):
        rate = n / by[f].median
        verdict = "meets" if rate >= TARGET_EVENTS_PER_S else "below"
        print(f"{f}: {rate:,.0f} events/s — target ≥ {TARGET_EVENTS_PER_S:,.0f} events/s: {verdict}"
              + (" (OTF2 is written one library call per event)" if f == "otf2" else ""))  # fmt: skip
    return 0


def run_in_tempdir() -> int:
    """``main`` with its files in a temporary directory that is removed afterwards."""
    import shutil

    try:
        return main()
    finally:
        for d in Path(tempfile.gettempdir()).glob(f"bench_export_{os.getpid()}_*"):
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(run_in_tempdir())
