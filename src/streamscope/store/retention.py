"""Retention of a long run's frames (``--keep``): the latest stretch at full resolution, older
stretches rolled up into coarser frames, so that a run of any length holds few frames.

In: a run file's connection, the run's keep span, its queries' and its own frame lengths, and how
far the run has got. Out: the file's ``frame``/``stat``/``histogram`` rows (and the per-frame
``drops``, ``monitor``, ``stacks`` and ``vq_level`` rows) older than the keep span merged into
frames ``FACTOR`` times longer, in place, as the whole-run figures merge them (``whole_run``:
extremes keep, counts and sums add, anything else is the mean weighted by the time each frame
observed), so that every whole-run figure and every total (items through a channel, a stack's
time, a virtual queue's time at each level) is what it was.

The levels (``edges``): frames of length ``f`` are kept for ``keep``; older ones become frames of
``16 f``, kept for ``keep * 16 / 4`` more; older ones frames of ``256 f``, kept for
``keep * 256 / 4`` more; and so on. Each level then holds about ``keep / f`` frames (the first)
or a quarter of that (the others): a run of a day at ``keep / f = 250`` holds some 600 frames per
target. A coarse frame is aligned to its length from the run's start, and is made only once all
of it is old enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamscope.core.options import KEEP_FRAMES

if TYPE_CHECKING:
    import duckdb


#: How much longer each level's frames are than the level's before.
FACTOR = 16
#: Each level past the first keeps ``keep * FACTOR**level / SHARE`` of time.
SHARE = 4
#: A keep span holds at least this many frames (each level's span a whole frame of its own):
#: the run's are checked where its options are made; a query of longer frames keeps as many.
MIN_FRAMES = KEEP_FRAMES
#: A roll-up is made once an eighth of the keep span has gone by (``Retention.due``).
ROLL_EVERY = 8
#: Stats whose whole-run figure is the frames' total (the others: extremes, first and last, or
#: the mean weighted by observed time). ``analysis.series.whole_run`` reads them so too.
SUMMED_STATS = frozenset({"count", "sum", "violations", "rejected"})


def level_age_ns(keep_ns: int, level: int) -> int:
    """How old (ns, from the run's latest time) a frame of ``level`` may get before it is
    rolled into ``level + 1``."""
    age = keep_ns
    for k in range(1, level + 1):
        age += keep_ns * FACTOR**k // SHARE
    return age


def edges(keep_ns: int, frame_ns: int, now_ns: int) -> list[int]:
    """Where each level's frames (``frame_ns`` long at level 0) end at ``now_ns``: element
    ``k`` is the end of level ``k + 1``'s stretch (from the run's start); levels past the
    last have none. Each is a multiple of its level's frame length and not after the one
    before (a coarser level never overtakes a finer one)."""
    out: list[int] = []
    level = 0
    while True:
        width = frame_ns * FACTOR ** (level + 1)
        end = (now_ns - level_age_ns(keep_ns, level)) // width * width
        if end <= 0:
            return out
        out.append(end)
        level += 1


@dataclass(slots=True)
class Retention:
    """A run file's roll-ups so far (mutable: how far each level got, per frame length).

    ``frame_ns``: the frame length of each query (by id); ``run_frame_ns``: the run's own, of
    the per-frame ``drops`` and ``monitor`` rows."""

    keep_ns: int
    frame_ns: dict[int, int]
    run_frame_ns: int
    #: Per frame length, where each level's stretch ended at the last roll-up.
    _done: dict[int, list[int]] = field(default_factory=dict)
    #: The run's time at the last roll-up (ns from its start).
    _at_ns: int = 0

    def due(self, now_ns: int) -> bool:
        """Whether to roll up at ``now_ns``: once the shortest level-1 frame and an eighth of
        the keep span have gone by since the last (each roll-up costs a few statements over
        the whole file; the finest level holds up to an eighth more frames meanwhile)."""
        shortest = min([self.run_frame_ns, *self.frame_ns.values()])
        return now_ns - self._at_ns >= max(shortest * FACTOR, self.keep_ns // ROLL_EVERY)

    def roll(self, con: duckdb.DuckDBPyConnection, now_ns: int) -> int:
        """Roll up what is older than the levels allow at ``now_ns`` (in the caller's
        transaction); returns the frames rows merged away."""
        self._at_ns = max(self._at_ns, now_ns)
        merged = 0
        by_length: dict[int, list[int]] = {}
        for qid, f in self.frame_ns.items():
            by_length.setdefault(f, []).append(qid)
        for f in sorted({*by_length, self.run_frame_ns}):
            done = self._done.setdefault(f, [])
            keep = max(self.keep_ns, MIN_FRAMES * f)
            for level, end in enumerate(edges(keep, f, now_ns)):
                start = done[level] if level < len(done) else 0
                if end <= start:
                    continue
                width = f * FACTOR ** (level + 1)
                if f in by_length:
                    merged += _roll_results(con, by_length[f], f, width, start, end)
                if f == self.run_frame_ns:
                    _roll_per_frame(con, f, width, start, end)
                if level < len(done):
                    done[level] = end
                else:
                    done.append(end)
        return merged


def roll_rows(
    kept: Retention, rows: dict[str, list[tuple[Any, ...]]], now_ns: int
) -> dict[str, list[tuple[Any, ...]]]:
    """``Retention.roll`` over a run held as row lists (``frame``, ``stat``, ``histogram``,
    ``drops``, ``monitor``, shaped as the file's tables): the lists it leaves, in the same
    order a run file's rows would have. Made in a DuckDB of its own, in memory, holding those
    tables alone (a live page's run: its rows are bounded by the same levels as the file's)."""
    from streamscope.store import _sqlio
    from streamscope.store.duck import duckdb as duck

    con = duck.connect()
    try:
        _sqlio.create_tables(con, list(rows))
        for table, table_rows in rows.items():
            if table_rows:
                _sqlio.insert(con, table, list(zip(*table_rows, strict=True)))
        kept.roll(con, now_ns)
        return {
            table: con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()  # noqa: S608
            for table in rows
        }
    finally:
        con.close()


def _roll_results(
    con: duckdb.DuckDBPyConnection, qids: Sequence[int], f: int, width: int, lo: int, hi: int
) -> int:
    """The frames of queries ``qids`` (``f`` ns long) within ``[lo, hi)`` merged into frames
    of ``width``; returns the rows merged away."""
    ids = ", ".join(str(int(q)) for q in qids)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE roll_m AS SELECT query_id, target, frame, covered_ns, "  # noqa: S608
        f"t_start_ns // {width} AS b FROM frame WHERE query_id IN ({ids}) "
        f"AND t_start_ns >= {lo} AND t_end_ns <= {hi}"
    )
    row = con.execute("SELECT count(*) FROM roll_m").fetchone()
    n = int(row[0]) if row else 0
    if not n:
        return 0
    summed = ", ".join(f"'{s}'" for s in sorted(SUMMED_STATS))
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE roll_s AS
        SELECT s.query_id, s.target, m.b, s.point, s.stat, CASE
          WHEN s.stat = 'max' THEN max(s.value)
          WHEN s.stat = 'min' THEN min(s.value)
          WHEN s.stat IN ({summed}) THEN sum(s.value)
          WHEN s.stat = 'first' THEN arg_min(s.value, s.frame) FILTER (s.value IS NOT NULL)
          WHEN s.stat = 'last' THEN arg_max(s.value, s.frame) FILTER (s.value IS NOT NULL)
          WHEN sum(m.covered_ns) FILTER (s.value IS NOT NULL) > 0 THEN
            sum(s.value * m.covered_ns) / sum(m.covered_ns) FILTER (s.value IS NOT NULL)
          ELSE avg(s.value) END AS value, min(s.rowid) AS o
        FROM stat s JOIN roll_m m USING (query_id, target, frame)
        GROUP BY s.query_id, s.target, m.b, s.point, s.stat"""  # noqa: S608
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE roll_h AS
        SELECT h.query_id, h.target, m.b, h.point, h.bin, h.lo, h.hi, sum(h.weight) AS weight,
          min(h.rowid) AS o
        FROM histogram h JOIN roll_m m USING (query_id, target, frame)
        GROUP BY h.query_id, h.target, m.b, h.point, h.bin, h.lo, h.hi"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE roll_f AS
        SELECT query_id, target, b * {width} // {f} AS frame, b * {width} AS t_start_ns,
          (b + 1) * {width} AS t_end_ns, sum(covered_ns) AS covered_ns, b
        FROM roll_m GROUP BY query_id, target, b"""  # noqa: S608
    )
    _roll_levels(con)
    for table in ("stat", "histogram", "frame"):
        con.execute(
            f"DELETE FROM {table} t USING roll_m m WHERE t.query_id = m.query_id "  # noqa: S608
            "AND t.target = m.target AND t.frame = m.frame"
        )
    con.execute(
        "INSERT INTO frame SELECT query_id, target, frame, t_start_ns, t_end_ns, covered_ns "
        "FROM roll_f ORDER BY query_id, target, frame"
    )
    con.execute(
        "INSERT INTO stat SELECT s.query_id, s.target, f.frame, s.point, s.stat, s.value "
        "FROM roll_s s JOIN roll_f f USING (query_id, target, b) ORDER BY f.frame, s.o"
    )
    con.execute(
        "INSERT INTO histogram SELECT h.query_id, h.target, f.frame, h.point, h.bin, h.lo, "
        "h.hi, h.weight FROM roll_h h JOIN roll_f f USING (query_id, target, b) "
        "ORDER BY f.frame, h.o"
    )
    con.execute(
        "INSERT INTO vq_level SELECT v.query_id, v.target, f.frame, v.series, v.level, "
        "v.fraction FROM roll_v v JOIN roll_f f USING (query_id, target, b) "
        "ORDER BY f.frame, v.o"
    )
    row = con.execute("SELECT count(*) FROM roll_f").fetchone()
    for temp in ("roll_m", "roll_s", "roll_h", "roll_f", "roll_v"):
        con.execute(f"DROP TABLE {temp}")
    return n - (int(row[0]) if row else 0)


def _roll_levels(con: duckdb.DuckDBPyConnection) -> None:
    """A virtual queue's level distributions (``vq_level``) of the frames in ``roll_m``, per
    longer frame (``roll_v``, their rows deleted): each level's fraction the mean of its
    frames' weighted by the time each observed, over the frames that have that series (a
    frame without a row for a level was never at it), so the whole run's distribution is what
    it was."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE roll_v AS
        WITH l AS (
          SELECT v.query_id, v.target, m.b, v.frame, v.series, v.level, v.fraction, v.rowid AS o,
            m.covered_ns::DOUBLE AS w
          FROM vq_level v JOIN roll_m m USING (query_id, target, frame)),
        per AS (
          SELECT query_id, target, b, series, sum(w) AS w, count(*) AS n FROM (
            SELECT DISTINCT query_id, target, b, frame, series, w FROM l) GROUP BY ALL)
        SELECT l.query_id, l.target, l.b, l.series, l.level, CASE WHEN per.w > 0
            THEN sum(l.fraction * l.w) / per.w ELSE sum(l.fraction) / per.n END AS fraction,
          min(l.o) AS o
        FROM l JOIN per USING (query_id, target, b, series)
        GROUP BY l.query_id, l.target, l.b, l.series, l.level, per.w, per.n"""
    )
    con.execute(
        "DELETE FROM vq_level t USING roll_m m WHERE t.query_id = m.query_id "
        "AND t.target = m.target AND t.frame = m.frame"
    )


def _roll_per_frame(con: duckdb.DuckDBPyConnection, f: int, width: int, lo: int, hi: int) -> None:
    """The run's per-frame rows (``drops`` per probe, the ``monitor``'s own, the ``stacks``
    sampled) of frames ``f`` ns long within ``[lo, hi)`` merged into frames of ``width``:
    counts and times add, the lag keeps its most."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE roll_k AS
        SELECT t_ns // {width} * {width} AS t_ns, stage, state, stack,
          sum(samples) AS samples, sum(ns) AS ns, min(rowid) AS o
        FROM stacks WHERE t_ns >= {lo} AND t_ns < {hi} AND frame_ns < {width}
        GROUP BY t_ns // {width}, stage, state, stack"""  # noqa: S608
    )
    con.execute(
        f"DELETE FROM stacks WHERE t_ns >= {lo} AND t_ns < {hi} AND frame_ns < {width}"  # noqa: S608
    )
    con.execute(
        f"INSERT INTO stacks SELECT t_ns, {width}, stage, state, stack, samples, ns "  # noqa: S608
        "FROM roll_k ORDER BY t_ns, o"
    )
    con.execute("DROP TABLE roll_k")
    first, last, per = lo // f, hi // f, width // f
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE roll_d AS
        SELECT probe_id, frame // {per} * {per} AS frame, sum(dropped) AS dropped,
          sum(recorded) AS recorded, min(rowid) AS o
        FROM drops WHERE frame >= {first} AND frame < {last} GROUP BY probe_id, frame // {per}"""  # noqa: S608
    )
    con.execute(f"DELETE FROM drops WHERE frame >= {first} AND frame < {last}")  # noqa: S608
    con.execute(
        "INSERT INTO drops SELECT probe_id, frame, dropped, recorded FROM roll_d ORDER BY o"
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE roll_d AS
        SELECT frame // {per} * {per} AS frame, max(lag_ns) AS lag_ns, sum(records) AS records,
          sum(cpu_ns) AS cpu_ns, sum(drains) AS drains
        FROM monitor WHERE frame >= {first} AND frame < {last} GROUP BY frame // {per}"""  # noqa: S608
    )
    con.execute(f"DELETE FROM monitor WHERE frame >= {first} AND frame < {last}")  # noqa: S608
    con.execute(
        "INSERT INTO monitor SELECT frame, lag_ns, records, cpu_ns, drains FROM roll_d "
        "ORDER BY frame"
    )
    con.execute("DROP TABLE roll_d")


#: The stretches of a run whose frames were rolled up, per coarse frame length: start, end,
#: that length and the query's own (ns), earliest first.
ROLLED_UP_SQL = (
    "SELECT min(f.t_start_ns), max(f.t_end_ns), f.t_end_ns - f.t_start_ns AS w, q.frame_ns "
    "FROM frame f JOIN query q ON q.id = f.query_id "
    "WHERE f.t_end_ns - f.t_start_ns > q.frame_ns "
    "GROUP BY w, q.frame_ns ORDER BY 1, 3 DESC"
)


def rolled_up_text(stretches: Sequence[tuple[int, int, int, int]]) -> str:
    """What a reader is told of a run's rolled-up stretches (``ROLLED_UP_SQL``'s rows)."""
    parts = [f"{_s(a)} to {_s(b)} in frames of {_s(w)}" for a, b, w, _ in stretches]
    end = max(b for _, b, _, _ in stretches)
    return (
        f"the frames before {_s(end)} were rolled up into coarser frames as the run went "
        f"(--keep): {'; '.join(parts)}; their totals and the whole-run figures are as they "
        f"were, their detail is gone"
    )


def _s(ns: int) -> str:
    return f"{ns / 1e9:.6g} s"


__all__ = [
    "FACTOR",
    "MIN_FRAMES",
    "ROLLED_UP_SQL",
    "ROLL_EVERY",
    "SHARE",
    "SUMMED_STATS",
    "Retention",
    "edges",
    "level_age_ns",
    "roll_rows",
    "rolled_up_text",
]
