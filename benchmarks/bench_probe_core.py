"""What the native probe core adds per channel event and per state change (target: <= 50 ns),
timed and counted in instructions.

In: nothing. Out: ns per event, interleaved repetitions: a channel's put+get with both ends
tapped against the same put+get untapped (two events per pair), and a state change recorded
against the same change on a tracker with no ring; the pure-Python twin's figures beside them;
and, where valgrind is installed, the instructions per event counted by ``valgrind
--tool=callgrind`` on the same loops (repeatable on a noisy machine: the difference of two
otherwise identical runs, divided by the events).

    python benchmarks/bench_probe_core.py [--quick] [--reps N] [--events N]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from _harness import (
    callgrind_instructions,
    fmt_spread,
    interleave,
    machine,
    paired_ratios,
    parser,
    table,
)
from streamscope.core import native, rings
from streamscope.core.records import Kind
from streamscope.core.rings import W_R

TARGET_NS = 50.0


def channel_loop(impl: ModuleType, tapped: bool, n: int) -> Callable[[], tuple[float]]:
    """ns per put+get pair (two events when tapped). Each repetition first hands every slot
    back (``read`` := ``written``), as a drain would, so no ring ever refuses."""
    q = impl.Fifo(0)
    mems = []
    if tapped:
        tail_mem = rings.anonymous_ring(1, int(Kind.PUT), 1 << 20)
        head_mem = rings.anonymous_ring(2, int(Kind.GET), 1 << 20)
        q.tail = impl.Ring(tail_mem, impl.Clock())
        q.head = impl.Ring(head_mem, impl.Clock())
        mems = [(tail_mem, q.tail), (head_mem, q.head)]

    def run() -> tuple[float]:
        for mem, ring in mems:
            native.store_release(mem, W_R, ring.written)
        put, get = q.put, q.get
        t0 = time.perf_counter_ns()
        for i in range(n):
            put(i)
            get()
        return ((time.perf_counter_ns() - t0) / n,)

    return run


#: Path tags measured: untagged FIFOs; tags carried but none given; every item tagged at the
#: origin and recorded leaving and arriving; one item in about TAG_EVERY tagged; and the same
#: two-channel path with the origin's tail and the end's head tapped (as the default queries
#: do), without tags and with every item tagged (a tag then shares its tap's clock reading).
TAG_MODES = ("off", "carried", "every item", "1 in 64", "ends tapped", "ends tapped, every item")
TAG_EVERY = 64


def path_loop(impl: ModuleType, mode: str, n: int) -> Callable[[], tuple[float]]:
    """ns per item along a two-channel path (put, get, put, get in one thread, playing a source,
    a 1:1 stage and the path's end; the thread's tag cleared before each source put, as a
    source's thread has none), its items tagged as ``mode`` says."""
    a, b = impl.Fifo(0), impl.Fifo(0)
    mems = []
    if mode not in ("off", "ends tapped"):
        a.keep_tags()
        b.keep_tags()
    if mode.startswith("ends tapped"):
        tmem = rings.anonymous_ring(3, int(Kind.PUT), 1 << 20)
        hmem = rings.anonymous_ring(4, int(Kind.GET), 1 << 20)
        a.tail, b.head = impl.Ring(tmem, impl.Clock()), impl.Ring(hmem, impl.Clock())
        mems += [(tmem, a.tail), (hmem, b.head)]
    if mode.endswith("every item") or mode == "1 in 64":
        dmem = rings.anonymous_ring(1, int(Kind.DEPART), 1 << 20)
        amem = rings.anonymous_ring(2, int(Kind.ARRIVE), 1 << 20)
        dring, aring = impl.Ring(dmem, impl.Clock()), impl.Ring(amem, impl.Clock())
        a.tag_departures(dring, TAG_EVERY if mode == "1 in 64" else 1)
        b.tag_arrivals(aring)
        mems += [(dmem, dring), (amem, aring)]

    def run() -> tuple[float]:
        for mem, ring in mems:
            native.store_release(mem, W_R, ring.written)
        put_a, get_a, put_b, get_b = a.put, a.get, b.put, b.get
        source = impl.set_current_tag  # each role its own thread: the source carries no tag
        t0 = time.perf_counter_ns()
        for i in range(n):
            source(0)
            put_a(i)
            put_b(get_a())
            get_b()
        return ((time.perf_counter_ns() - t0) / n,)

    return run


def state_loop(impl: ModuleType, recorded: bool, n: int) -> Callable[[], tuple[float]]:
    mem = rings.anonymous_ring(3, int(Kind.STATE), 1 << 20)
    ring = impl.Ring(mem, impl.Clock()) if recorded else None
    tracker = impl.StateTracker("bench", ring)

    def run() -> tuple[float]:
        if ring is not None:
            native.store_release(mem, W_R, ring.written)
        set_ = tracker.set
        t0 = time.perf_counter_ns()
        for _ in range(n // 2):
            set_(1)
            set_(3)
        return ((time.perf_counter_ns() - t0) / (2 * (n // 2)),)

    return run


_CALLGRIND_SCRIPT = """
import sys
from streamscope.core import native, rings
from streamscope.core.records import Kind
what, on, n = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
impl = native.implementations()["native"]
clock = impl.Clock()
if what == "channel":
    q = impl.Fifo(0)
    if on:
        q.tail = impl.Ring(rings.anonymous_ring(1, 1, 1 << 17), clock)
        q.head = impl.Ring(rings.anonymous_ring(2, 2, 1 << 17), clock)
    put, get = q.put, q.get
    for i in range(n):
        put(i)
        get()
else:
    ring = impl.Ring(rings.anonymous_ring(3, 3, 1 << 17), clock) if on else None
    set_ = impl.StateTracker("s", ring).set
    for _ in range(n // 2):
        set_(1)
        set_(3)
"""


def callgrind(what: str, n: int) -> float | None:
    """Instructions per event the probes add inside the native core, or None without valgrind.

    Only the native calls themselves are counted (``--toggle-collect`` on ``Fifo_put`` and
    ``Fifo_get``, or ``Tracker_set``, callees included: the clock read, the ring write): the
    Python loop around them and the interpreter's start-up are left out, so the counts repeat
    exactly from run to run.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None or "native" not in native.implementations():
        return None
    toggles = ["Fifo_put", "Fifo_get"] if what == "channel" else ["Tracker_set"]
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "loop.py"
        script.write_text(_CALLGRIND_SCRIPT)
        for on in ("0", "1"):
            out = Path(tmp) / f"cg.{what}.{on}"
            total = callgrind_instructions(
                valgrind,
                ["--collect-atstart=no", *(f"--toggle-collect={t}" for t in toggles),
                 f"--callgrind-out-file={out}"],
                [str(script), what, on, str(n)],
            )  # fmt: skip
            if total is None:
                return None
            totals.append(total)
    events = 2 * n if what == "channel" else 2 * (n // 2)
    return (totals[1] - totals[0]) / events


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=None, help="events per timed loop")
    args = ap.parse_args()
    quick = args.quick
    reps = args.reps or (3 if quick else 15)
    n = args.events or (50_000 if quick else 400_000)
    print(machine())
    print(
        f"probe core in use: {native.IMPLEMENTATION}; {reps} interleaved repetitions, {n:,} events"
    )
    rows = []
    added: dict[tuple[str, str], float] = {}
    for name, impl in sorted(native.implementations().items()):
        for what, make in (("channel event", channel_loop), ("state change", state_loop)):
            on, off = interleave(
                [("recorded", make(impl, True, n)), ("not recorded", make(impl, False, n))],
                reps,
            )[0]
            events = 2 if what == "channel event" else 1
            diff = (on.median - off.median) / events
            added[(name, what)] = diff
            ratio = paired_ratios(on, off)
            rows.append(
                [f"{name}: {what}", f"{off.median:,.1f}", f"{on.median:,.1f}", fmt_spread(on),
                 f"{diff:+,.1f}", f"{ratio.median:.2f}x"]
            )  # fmt: skip
    print(
        table(["what", "ns not recorded", "ns recorded", "spread", "added ns/event", "ratio"], rows)
    )
    print(
        "(a channel's put+get is two events; the figures per pair are shown, the added cost per event)"
    )
    tag_rows = []
    for name, impl in sorted(native.implementations().items()):
        got = interleave([(m, path_loop(impl, m, n)) for m in TAG_MODES], reps)[0]
        by = dict(zip(TAG_MODES, got, strict=True))
        for m in TAG_MODES[1:]:
            base = by["ends tapped" if m.startswith("ends tapped") else "off"].median
            if m == "ends tapped":
                continue
            diff = by[m].median - base
            per_tag = diff if m.endswith("every item") else None
            if name == "native" and per_tag is not None:
                added[("native", f"tagged item ({m})")] = per_tag
            tag_rows.append(
                [f"{name}: {m}", f"{base:,.1f}", f"{by[m].median:,.1f}", fmt_spread(by[m]),
                 f"{diff:+,.1f}", "-" if per_tag is None else f"{per_tag:+,.1f}"]
            )  # fmt: skip
    print(
        table(["path tags", "ns per item, untagged", "ns per item", "spread", "added ns/item",
               "added ns/tagged item"], tag_rows)
    )  # fmt: skip
    print(
        "(an item along a two-channel path: put, get, put, get; a tagged item is recorded "
        "leaving the origin and arriving at the end)"
    )
    cg_n = 2_000 if quick else 100_000
    for what in ("state",) if quick else ("channel", "state"):
        ins = callgrind(what, cg_n)
        if ins is None:
            print(f"callgrind ({what}): not counted (valgrind or the native core is missing)")
        else:
            print(f"callgrind ({what}): {ins:,.1f} instructions added per event")
    for what in ("channel event", "state change", "tagged item (every item)",
                 "tagged item (ends tapped, every item)"):  # fmt: skip
        ns = added.get(("native", what))
        if ns is not None:
            print(
                f"target <= {TARGET_NS:.0f} ns per {what} in the native core: {ns:.1f} ns "
                f"({'meets' if ns <= TARGET_NS else 'misses'})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
