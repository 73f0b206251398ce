"""Profiles from ENTER/EXIT records: any split into batches gives the brute-force totals, and
the tracer's records of a real call tree give its call counts."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.profile import FunctionProfile, ProfileBuilder
from streamscope.core import native
from streamscope.core.records import Kind
from streamscope.probes.tracing import FunctionTracer

ENTER, EXIT = int(Kind.ENTER), int(Kind.EXIT)


@dataclass(frozen=True)
class Call:
    fid: int
    lead_ns: int  # from the parent's previous event to this ENTER
    tail_ns: int  # from the last child's EXIT (or this ENTER) to this EXIT
    children: tuple[Call, ...]


def calls(max_fid: int = 4) -> st.SearchStrategy[Call]:
    leaf = st.builds(
        Call,
        st.integers(1, max_fid),
        st.integers(0, 50),
        st.integers(0, 50),
        st.just(()),
    )
    return st.recursive(
        leaf,
        lambda kids: st.builds(
            Call,
            st.integers(1, max_fid),
            st.integers(0, 50),
            st.integers(0, 50),
            st.lists(kids, max_size=4).map(tuple),
        ),
        max_leaves=30,
    )


def flatten(roots: list[Call]) -> tuple[list[int], list[int], list[int]]:
    ticks: list[int] = []
    kinds: list[int] = []
    fids: list[int] = []
    t = 0

    def walk(c: Call) -> None:
        nonlocal t
        t += c.lead_ns
        ticks.append(t)
        kinds.append(ENTER)
        fids.append(c.fid)
        for child in c.children:
            walk(child)
        t += c.tail_ns
        ticks.append(t)
        kinds.append(EXIT)
        fids.append(c.fid)

    for r in roots:
        walk(r)
    return ticks, kinds, fids


def brute_force(roots: list[Call]) -> dict[int, tuple[int, int, int, int]]:
    """fid -> (calls, inclusive, self, max), by recursion over the tree itself."""
    acc: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def span(c: Call) -> int:
        return sum(k.lead_ns + span(k) for k in c.children) + c.tail_ns

    def walk(c: Call) -> None:
        total = span(c)
        child = sum(span(k) for k in c.children)
        a = acc[c.fid]
        a[0] += 1
        a[1] += total
        a[2] += total - child
        a[3] = max(a[3], total)
        for k in c.children:
            walk(k)

    for r in roots:
        walk(r)
    return {fid: (a[0], a[1], a[2], a[3]) for fid, a in acc.items()}


def as_table(profiles: list[FunctionProfile], stage: str) -> dict[int, tuple[int, int, int, int]]:
    return {
        p.function: (p.calls, int(p.total_ns), int(p.self_ns), int(p.max_ns))
        for p in profiles
        if p.stage == stage
    }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(calls(), min_size=1, max_size=4),
    st.lists(calls(), max_size=3),
    st.lists(st.integers(0, 400), max_size=6),
)
def test_any_batching_gives_the_brute_force_profile(
    roots_a: list[Call], roots_b: list[Call], cuts: list[int]
) -> None:
    builder = ProfileBuilder()
    arrays_a = [np.array(x, dtype=np.int64) for x in flatten(roots_a)]
    arrays_b = [np.array(x, dtype=np.int64) for x in flatten(roots_b)]
    n = len(arrays_a[0])
    bounds = [0, *sorted(min(c, n) for c in cuts), n]
    half = len(arrays_b[0]) // 2
    # two keys, their batches interleaved: their stacks must not mix
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        builder.add("a", *(x[lo:hi] for x in arrays_a))
        if i == 0:
            builder.add("b", *(x[:half] for x in arrays_b))
    builder.add("b", *(x[half:] for x in arrays_b))
    builder.finish(10**9)
    assert builder.unmatched == 0
    assert builder.open_at_end == 0
    profiles = builder.profiles()
    assert as_table(profiles, "a") == brute_force(roots_a)
    assert as_table(profiles, "b") == brute_force(roots_b)
    stages = [p.stage for p in profiles]
    assert stages == sorted(stages)
    for stage in ("a", "b"):
        totals = [p.total_ns for p in profiles if p.stage == stage]
        assert totals == sorted(totals, reverse=True)
    for p in profiles:
        assert FunctionProfile.from_dict(p.to_dict()) == p


@settings(max_examples=100, deadline=None)
@given(st.lists(calls(), min_size=1, max_size=3), st.integers(1, 10))
def test_calls_left_open_are_closed_at_the_end(roots: list[Call], keep_exits: int) -> None:
    ticks, kinds, fids = flatten(roots)
    # drop the last few records: the calls they would have closed stay open
    cut = len(ticks) - min(keep_exits, len(ticks) - 1)
    builder = ProfileBuilder()
    builder.add(
        "s",
        np.array(ticks[:cut], dtype=np.int64),
        np.array(kinds[:cut], dtype=np.int64),
        np.array(fids[:cut], dtype=np.int64),
    )
    depth = sum(1 if k == ENTER else -1 for k in kinds[:cut])
    end = ticks[cut - 1] + 7
    builder.finish(end)
    assert builder.open_at_end == depth
    got = sum(p.calls for p in builder.profiles())
    assert got == kinds[:cut].count(ENTER)


def test_an_exit_without_its_enter_is_counted_and_skipped() -> None:
    builder = ProfileBuilder()
    i64 = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
    # EXIT 2 (its ENTER refused), then a call of 1 holding an orphan EXIT of 3
    builder.add("s", i64([0, 1, 5, 9]), i64([EXIT, ENTER, EXIT, EXIT]), i64([2, 1, 3, 1]))
    assert builder.unmatched == 2
    assert as_table(builder.profiles(), "s") == {1: (1, 8, 8, 8)}


@dataclass
class Node:
    fid: int
    children: list[Node]


def nodes(n_funcs: int) -> st.SearchStrategy[Node]:
    return st.recursive(
        st.builds(Node, st.integers(1, n_funcs), st.just([])),
        lambda kids: st.builds(Node, st.integers(1, n_funcs), st.lists(kids, max_size=3)),
        max_leaves=25,
    )


N_FUNCS = 4


def run(funcs: dict[int, object], node: Node) -> int:
    return 1 + sum(funcs[c.fid](funcs, c) for c in node.children)  # type: ignore[operator]


def node_function(i: int) -> object:
    """A distinct function per id (the tracer gives one id per name)."""

    def node(funcs: dict[int, object], n: Node) -> int:
        return run(funcs, n)

    node.__qualname__ = f"node{i}"
    return node


@settings(max_examples=60, deadline=None)
@given(st.lists(nodes(N_FUNCS), min_size=1, max_size=3), st.sampled_from([4, 8, 1 << 16]))
def test_the_tracer_on_a_call_tree_gives_its_call_counts(roots: list[Node], capacity: int) -> None:
    tracer = FunctionTracer(capacity=capacity)
    funcs: dict[int, object] = {}
    for i in range(1, N_FUNCS + 1):
        funcs[i] = tracer.instrument(node_function(i))
    assert tracer.functions == [f"{__name__}:node{i}" for i in range(1, N_FUNCS + 1)]
    tap = tracer.bind("s", 1)
    builder = ProfileBuilder()
    refused = 0
    expected: Counter[int] = Counter()
    for root in roots:
        assert funcs[root.fid](funcs, root) == count(root, expected)  # type: ignore[operator]
        rec, dropped = tap.drain()  # one drain per root: batches of varying size
        refused += dropped
        builder.add("s", rec["ticks"], rec["kind"].astype(np.int64), rec["value"])
    builder.finish(native.host_ns() + 1)
    assert builder.unmatched == 0
    assert builder.open_at_end == 0
    got = {p.function: p.calls for p in builder.profiles()}
    if refused == 0:
        assert got == dict(expected)
    else:
        # a refused call is refused whole: ENTER and EXIT, two events
        assert refused % 2 == 0
        assert sum(got.values()) + refused // 2 == sum(expected.values())
        assert all(got.get(f, 0) <= n for f, n in expected.items())
    assert dict(zip(range(1, N_FUNCS + 1), tracer.calls, strict=True)) == {
        f: expected.get(f, 0) for f in range(1, N_FUNCS + 1)
    }


def count(node: Node, into: Counter[int]) -> int:
    into[node.fid] += 1
    return 1 + sum(count(c, into) for c in node.children)
