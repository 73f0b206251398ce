"""A queue that several stages put into or take from: its other producers and consumers
(``Topology.ends``), as declarations grow the topology, as its links run, and in the run file."""

from __future__ import annotations

from pathlib import Path

from streamscope.core.topology import ChannelEnd, ChannelInfo, Known, StageInfo, Topology
from streamscope.store import DuckDBStore, RunMeta, load

FAN_IN = ChannelInfo("fast -> sink", "fast", "sink", 16)
BASE = Topology(
    "p", stages=(StageInfo("fast", "main", "stage"), StageInfo("sink", "main", "stage"))
)


def test_a_channel_declared_again_with_another_producer_gains_it_as_an_end() -> None:
    known = Known(BASE)
    topo = known.grow(BASE, Topology("", channels=(FAN_IN,)))
    assert topo.ends == ()
    again = ChannelInfo("fast -> sink", "slow", "sink", 16)  # the same queue, put into by slow
    grown = known.grow(topo, Topology("", channels=(again,)), Topology("", channels=(FAN_IN,)))
    assert grown.channels == (FAN_IN,)
    assert grown.ends == (ChannelEnd("fast -> sink", "slow", "tail"),)
    assert known.grow(grown, Topology("", ends=grown.ends)) is grown  # nothing new
    reader = Topology("", ends=(ChannelEnd("fast -> sink", "other", "head"),))
    both = known.grow(grown, reader)
    assert both.producers(FAN_IN) == ("fast", "slow")
    assert both.consumers(FAN_IN) == ("sink", "other")
    assert both == topo.merged(Topology("", channels=(again,))).merged(reader)
    assert {(a, b) for _, a, b in both.links()} == {
        ("fast", "sink"), ("slow", "sink"), ("fast", "other"), ("slow", "other")
    }  # fmt: skip


def test_a_route_runs_through_every_producer() -> None:
    out = ChannelInfo("sink -> store", "sink", "store", 4)
    topo = Topology("p", channels=(FAN_IN, out), ends=(ChannelEnd("fast -> sink", "slow", "tail"),))
    assert topo.route("slow", "store") == (FAN_IN, out)
    assert topo.route("fast", "store") == (FAN_IN, out)
    assert topo.route("store", "slow") == ()


def test_ends_that_appear_during_a_run_are_in_its_file(tmp_path: Path) -> None:
    path = tmp_path / "fan.duckdb"
    store = DuckDBStore(path)
    topo = BASE.merged(Topology("", channels=(FAN_IN,)))
    store.begin(RunMeta("r", "fan", "fan.py", "", (), "h", 1, 10**9, "0"), topo, [])
    grown = topo.merged(Topology("", ends=(ChannelEnd("fast -> sink", "slow", "tail"),)))
    store.amend(grown, None)
    store.finish("completed", None, 2, 1)
    store.close()
    with load(path) as run:
        assert run.topology.ends == grown.ends
        assert run.topology.producers(FAN_IN) == ("fast", "slow")
        (doc,) = run.to_json()["channels"]
        assert (doc["producers"], doc["consumers"]) == (["fast", "slow"], ["sink"])
