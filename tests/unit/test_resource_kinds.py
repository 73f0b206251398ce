"""Resource kinds: each kind's answers are what the pipeline decided from the kind's name before
the kinds had modules of their own (the old rules are written out here), every way of making a
resource gives a registered kind, run files keep the kinds' names, and no pipeline module outside
``pipeline/kinds`` asks what a resource is by comparing its kind with a name."""

from __future__ import annotations

import ast
import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

import streamscope as ss
from streamscope.core.errors import PipelineError
from streamscope.pipeline import kinds
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.describe.resources import THREAD, LinkSpec, Resource, resolve
from streamscope.pipeline.kinds import KINDS, RunsIn, kind_of
from streamscope.pipeline.run.runner import make_channels

CLOCK = "rate_ppm=40,offset_s=1.5,tick_ns=2.5"
#: One resource of every kind and flavour, each way a program makes one.
RESOURCES: dict[str, Resource] = {
    "thread": THREAD,
    "asyncio": ss.Asyncio("loop"),
    "process": ss.Process("proc"),
    "process_clock": ss.Process("clocked", clock=CLOCK),
    "process_own": resolve("process", "stage"),
    "device": ss.EmulatedDevice("dev"),
    "device_2": ss.EmulatedDevice("dev2", bulk_size=4),
    # Its probe cores need Amaranth only where it starts; its answers do not.
    "rtl": dataclasses.replace(ss.EmulatedDevice("rtl"), rtl="verilator"),
    "host": ss.Host("node-a", clock=CLOCK),
    "host_2": ss.Host("node-b", bulk_size=3),
}


# The rules as the pipeline wrote them with the kinds' names, before ``pipeline/kinds``.


def _old_in_main_process(r: Resource) -> bool:
    return r.kind in ("thread", "asyncio")


def _old_transport(a: Resource, b: Resource) -> str:
    if a == b or (_old_in_main_process(a) and _old_in_main_process(b)):
        return "thread"
    return "link" if {"device", "host"} & {a.kind, b.kind} else "process"


def _old_link(a: Resource, b: Resource) -> LinkSpec | str | None:
    if _old_transport(a, b) != "link":
        return None
    if a.kind == "device" and b.kind == "device":
        return "refused"
    if "host" in (a.kind, b.kind):
        return b.link if b.kind == "host" else a.link
    return a.link if a.kind == "device" else b.link


def _old_announced(r: Resource, local: bool, sampled: bool) -> bool:
    return bool(r.kind == "device" and (local or (r.rtl and sampled)))


def _pair(a: Resource, b: Resource) -> Pipeline:
    p = Pipeline("pair")
    p.add("a", range(3), resource=a)
    p.add("b", print, resource=b)
    p.connect("a", "b")
    return p


@pytest.mark.parametrize("name", RESOURCES)
def test_each_kind_answers_as_the_old_names_did(name: str) -> None:
    r = RESOURCES[name]
    k = kind_of(r)
    assert k.name == r.kind
    assert r.in_main_process == _old_in_main_process(r)
    assert (k.runs_in is RunsIn.MAIN) == (r.kind in ("thread", "asyncio"))
    # Pipeline.hosts, and a traced stage refused on a host; runner: a host is not forked.
    assert (k.runs_in is RunsIn.CLUSTER) == (r.kind == "host")
    # Pipeline._check_hosts: what cannot share a pipeline with hosts.
    assert (k.runs_in is RunsIn.CHILD) == (r.kind in ("process", "device"))
    # Pipeline.add (the loop's lag) and scope.start_threads (a task of the loop).
    assert k.event_loop == (r.kind == "asyncio")
    # Runner._fork: a device's child gets the frame grid through a pipe (a host gets its own).
    if k.runs_in is RunsIn.CHILD:
        assert k.frame_grid == (r.kind == "device")
    for local, sampled in itertools.product((False, True), repeat=2):
        assert k.sends_data(local, sampled) == _old_announced(r, local, sampled)


def test_the_rtl_device_is_a_flavour_of_the_device() -> None:
    rtl, device = kind_of(RESOURCES["rtl"]), kind_of(RESOURCES["device"])
    assert rtl is kinds.RTL["device"] and device is KINDS["device"] and rtl is not device
    assert rtl.name == device.name == "device"
    assert not device.sends_data(False, True) and rtl.sends_data(False, True)


@pytest.mark.parametrize(("a", "b"), list(itertools.product(RESOURCES, repeat=2)))
def test_channel_transport_and_link_for_every_pair(a: str, b: str) -> None:
    ra, rb = RESOURCES[a], RESOURCES[b]
    p = _pair(ra, rb)
    ch = p.channels["a -> b"]
    assert p.channel_transport(ch) == _old_transport(ra, rb)
    want = _old_link(ra, rb)
    if want == "refused":
        with pytest.raises(PipelineError, match="two devices"):
            p.link_of(ch)
    else:
        assert p.link_of(ch) == want


def test_the_same_resource_at_both_ends_is_one_process() -> None:
    for r in RESOURCES.values():
        assert kinds.channel_transport(kind_of(r), kind_of(r), shared=True) == "thread"


def test_hosts_and_what_may_share_a_pipeline_with_them() -> None:
    for r in RESOURCES.values():
        p = Pipeline("h")
        p.add("src", range(3), resource=RESOURCES["host"])
        p.add("dst", print, resource=r)
        p.connect("src", "dst")
        assert p.hosts() == tuple(
            dict.fromkeys(["node-a", *([r.name] if r.kind == "host" else [])])
        )
        if r.kind in ("process", "device"):
            with pytest.raises(PipelineError, match=f"is on {r.kind} "):
                p.validate()
        else:
            p.validate()
        p.trace(stages=["dst"])
        if r.kind == "host":
            with pytest.raises(PipelineError, match="function tracing"):
                p.validate()
        elif r.kind not in ("process", "device"):
            p.validate()


def test_a_loop_lag_timer_comes_with_a_loops_first_stage_only() -> None:
    for name, r in RESOURCES.items():
        p = Pipeline("l")
        p.add("a", range(3), resource=r)
        p.add("b", print, resource=r)
        p.connect("a", "b")
        assert ("a.loop_lag" in p.probes) == (r.kind == "asyncio"), name
        assert "b.loop_lag" not in p.probes


class _Cluster:
    """The runner's side of a cluster, as far as ``make_channels`` asks it."""

    def __init__(self) -> None:
        self.links: dict[str, str | None] = {}

    def link(
        self, name: str, capacity: int, link: LinkSpec, consumer: str | None, *rest: Any
    ) -> str:
        self.links[name] = consumer
        return f"network {name}"


def test_channels_to_and_between_hosts_are_made_as_before() -> None:
    """A host's own channels are made on the host; a link to a host is the cluster's, its
    consumer named where that is a host."""
    a, b = RESOURCES["host"], RESOURCES["host_2"]
    p = Pipeline("c")
    p.add("t0", range(3))
    p.add("t1", lambda x: x)
    p.add("a0", lambda x: x, resource=a)
    p.add("a1", lambda x: x, resource=a)
    p.add("b0", lambda x: x, resource=b)
    p.add("t2", print, resource=ss.Asyncio())
    p.chain("t0", "t1", "a0", "a1", "b0", "t2")
    cluster = _Cluster()
    made = make_channels(p, None, False, cluster)  # type: ignore[arg-type]
    old: dict[str, str | None] = {}
    for ch in p.channels.values():
        src, dst = p.stages[ch.src].resource, p.stages[ch.dst].resource
        if _old_transport(src, dst) == "thread":
            if src.kind != "host":
                assert isinstance(made[ch.name], ThreadChannel)
            else:
                assert ch.name not in made
        elif "host" in (src.kind, dst.kind):
            old[ch.name] = dst.name if dst.kind == "host" else None
            assert made[ch.name] == f"network {ch.name}"
    assert cluster.links == old
    assert old == {"t1 -> a0": "node-a", "a1 -> b0": "node-b", "b0 -> t2": None}


def test_every_way_to_make_a_resource_gives_a_registered_kind() -> None:
    made = [
        THREAD,
        ss.Asyncio(),
        ss.Process("p"),
        ss.Process("p", clock=CLOCK),
        ss.EmulatedDevice("d"),
        ss.Host("h"),
        *(resolve(shorthand, "s") for shorthand in ("thread", "process", "asyncio")),
    ]
    try:
        made.append(ss.EmulatedDevice("r", rtl=True))
        made.append(ss.EmulatedDevice("v", rtl="verilator"))
    except ss.StreamscopeError:
        pass  # without Amaranth: RESOURCES["rtl"] stands for it
    for r in made:
        assert r.kind in KINDS and kind_of(r).name == r.kind, r
        assert resolve(r, "s") is r
    bad = Resource("x", "gpu")
    with pytest.raises(PipelineError, match="unknown resource kind 'gpu'"):
        resolve(bad, "s")
    with pytest.raises(PipelineError, match="unknown resource kind 'gpu'"):
        kind_of(bad)


def test_run_files_keep_the_kinds_names() -> None:
    """``ResourceInfo.kind`` is what run files hold: the names they always had."""
    p = Pipeline("names")
    p.add("src", range(3))
    for name, r in RESOURCES.items():
        p.add(name, print, resource=r)
        p.connect("src", name)
    got = {r.name: r.kind for r in p.topology().resources}
    assert got == {
        "main": "thread", "loop": "asyncio", "proc": "process", "clocked": "process",
        "proc:stage": "process", "dev": "device", "dev2": "device", "rtl": "device",
        "node-a": "host", "node-b": "host",
    }  # fmt: skip
    assert set(KINDS) == {"thread", "asyncio", "process", "device", "host"}


# No pipeline module outside ``pipeline/kinds`` asks what a resource is by its kind's name.

PIPELINE = Path(kinds.__file__).parent.parent
#: The names of resource kinds. Probe kinds (``state``, ``tail``, ``sampler``...) are another
#: thing, compared freely; so are the transports ``thread``/``process`` (``.transport``).
RESOURCE_KINDS = frozenset({"thread", "process", "device", "asyncio", "host", *KINDS})


def _operands(node: ast.AST) -> list[ast.AST]:
    """A comparison's or set operation's operands, and the elements of those that are tuples,
    lists or sets (``"host" in (a.kind, b.kind)``, ``{"device"} & {a.kind, b.kind}``)."""
    if isinstance(node, ast.Compare):
        top = [node.left, *node.comparators]
    elif isinstance(node, ast.BinOp):
        top = [node.left, node.right]
    else:
        return []
    out: list[ast.AST] = []
    for op in top:
        out.append(op)
        if isinstance(op, ast.Tuple | ast.List | ast.Set):
            out.extend(op.elts)
    return out


def kind_comparisons(source: str) -> list[int]:
    """Lines where a ``.kind`` is compared with (or combined with) a resource kind's name."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        ops = _operands(node)
        has_kind = any(isinstance(o, ast.Attribute) and o.attr == "kind" for o in ops)
        named = any(isinstance(o, ast.Constant) and o.value in RESOURCE_KINDS for o in ops)
        if has_kind and named:
            lines.append(node.lineno)
    return lines


def test_the_scan_sees_every_form_the_old_code_used() -> None:
    old = [
        'res.kind == "device"',
        'src.kind != "host"',
        'a.kind in ("thread", "asyncio")',
        'a.kind not in ("process", "device")',
        '"host" in (src.kind, dst.kind)',
        '{"device", "host"} & {a.kind, b.kind}',
        'kind_of(r).runs_in is RunsIn.CLUSTER and r.kind == "host"',
    ]
    for line in old:
        assert kind_comparisons(line) == [1], line
    for fine in ('p.kind == "state"', 'p.kind in ("tail", "send")', 'transport == "thread"',
                 'up.kind == "sampler"', 'resource == "thread"'):  # fmt: skip
        assert kind_comparisons(fine) == [], fine


def test_no_pipeline_module_compares_a_resource_kind_with_a_name() -> None:
    room = PIPELINE / "kinds"
    bad = [
        f"{path.relative_to(PIPELINE)}:{line}"
        for path in sorted(PIPELINE.rglob("*.py"))
        if room not in path.parents
        for line in kind_comparisons(path.read_text())
    ]
    assert not bad, "ask kinds.kind_of(resource) instead:\n" + "\n".join(bad)
