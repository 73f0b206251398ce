"""Which stages of a run are parallel replicas of one another, judged as one group.

In: a run's topology (and the stages whose states were measured). Out: ``stage_groups``, one
``StageGroup`` per single stage or group of replicas (``walk0`` .. ``walk7``), and the compact
labels they are named by (``walk0–walk7``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

from streamscope.core.topology import Topology

#: A name that ends in a number after something that is not a digit: ``walk7``, ``parser_3``.
_NUMBERED = re.compile(r"^(?P<stem>.*\D)(?P<num>\d+)$")
EN_DASH = "\u2013"
#: Starts the key of a group of numbered stages: no stage name holds it.
_GROUP = "\0"


@dataclass(frozen=True, slots=True)
class StageGroup:
    """Stages judged as one: a single stage, or parallel replicas of one stage.

    Replicas are stages whose names differ only in a trailing number (``walk0`` .. ``walk7``) and
    that sit alike in the topology: fed by the same stages and feeding the same stages (a
    neighbour that is itself a replica group counts as one, so parallel lanes ``a0 -> b0``,
    ``a1 -> b1`` group too). A name alone is not enough (``step1 -> step2`` is a chain, not
    replicas), nor is the topology alone (``decode -> audio, video -> mux`` are different work).
    ``label``: the stage's name, or the members as a compact range (``walk0–walk7``).
    ``aliases``: stages of the topology that stand for the whole group, without states of their
    own: a program instrumented by hand whose queues name the group (``reader -> parser``) while
    each worker names its own stage (``parser0`` .. ``parser3``). ``ins``/``outs``: the channels
    into and out of the group (its members' and its aliases'), in topology order.
    """

    label: str
    members: tuple[str, ...]
    stem: str = ""
    aliases: tuple[str, ...] = ()
    ins: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()

    @property
    def replicas(self) -> bool:
        return len(self.members) > 1

    @property
    def pattern(self) -> str:
        """A stage pattern for queries: ``walk*`` for a group, the name for a single stage."""
        return f"{self.stem}*" if self.replicas else self.members[0]


def range_label(names: Sequence[str]) -> str:
    """Numbered names as compact ranges: ``walk0..walk7`` → ``'walk0–walk7'`` (an en dash);
    ``w1, w2, w3, w5`` → ``'w1–w3, w5'``. Names without a shared stem are joined with commas."""
    parsed = [_NUMBERED.match(n) for n in names]
    stems = {m.group("stem") for m in parsed if m is not None}
    if len(names) < 2 or None in parsed or len(stems) != 1:
        return ", ".join(names)
    nums = sorted((int(m.group("num")), m.string) for m in parsed if m is not None)
    runs: list[list[tuple[int, str]]] = []
    for item in nums:
        if runs and item[0] == runs[-1][-1][0] + 1:
            runs[-1].append(item)
        else:
            runs.append([item])
    return ", ".join(r[0][1] if len(r) == 1 else f"{r[0][1]}{EN_DASH}{r[-1][1]}" for r in runs)


def stage_groups(topo: Topology, observed: Iterable[str] = ()) -> list[StageGroup]:
    """Every stage of ``topo`` in exactly one group, in topology order (a group where its first
    stage is; replicas in the order of their numbers). ``observed``: stages with recorded states;
    such a stage is never taken for an alias of a group, since it measured itself."""
    names = [s.name for s in topo.stages]
    srcs: dict[str, list[str]] = {}
    dsts: dict[str, list[str]] = {}
    for _, a, b in topo.links():
        dsts.setdefault(a, []).append(b)
        srcs.setdefault(b, []).append(a)
    number, by_stem = _numbered(names)
    aliases = _aliases(by_stem, srcs.keys() | dsts.keys(), set(observed), number)
    key = _split_by_place(names, by_stem, aliases, srcs, dsts)
    found: dict[str, list[str]] = {}
    for n in names:
        if n not in aliases:
            found.setdefault(key[n], []).append(n)
    groups = []
    for k, members in found.items():
        own = tuple(sorted(members, key=lambda m: number[m]) if len(members) > 1 else members)
        al = tuple(a for a, stem in aliases.items() if _GROUP + stem == k)
        groups.append(_group(topo, own, al))
    return groups


def _numbered(names: Sequence[str]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Each numbered name's number, and the numbered names by their stem."""
    number: dict[str, int] = {}
    by_stem: dict[str, list[str]] = {}
    for n in names:
        m = _NUMBERED.match(n)
        if m is not None:
            number[n] = int(m["num"])
            by_stem.setdefault(m["stem"], []).append(n)
    return number, by_stem


def _aliases(
    by_stem: dict[str, list[str]], ends: Set[str], observed: Set[str], number: dict[str, int]
) -> dict[str, str]:
    """Alias → stem: a channel end named like a stem (``parser`` for ``parser0``.., or
    ``parser_`` / ``parser`` for ``parser_0``..) whose numbered stages have no channels of
    their own, and that neither measured itself nor is numbered."""
    aliases: dict[str, str] = {}
    for stem, members in by_stem.items():
        if any(m in ends for m in members):
            continue
        for alias in dict.fromkeys((stem, stem.rstrip("-_. "))):
            if alias in ends and alias not in observed and alias not in number:
                aliases[alias] = stem
                break
    return aliases


def _split_by_place(
    names: Sequence[str],
    by_stem: dict[str, list[str]],
    aliases: dict[str, str],
    srcs: dict[str, list[str]],
    dsts: dict[str, list[str]],
) -> dict[str, str]:
    """Each stage's group key: stages of one stem share one until they sit differently in the
    topology (fed by or feeding other stages or groups); the others are their own group."""
    key = {n: n for n in names}
    for stem, members in by_stem.items():
        key.update(dict.fromkeys(members, _GROUP + stem))
    key.update((a, _GROUP + stem) for a, stem in aliases.items())
    fixed = {_GROUP + stem for stem in aliases.values()}  # its members have no channels

    def where(n: str) -> tuple[frozenset[str], frozenset[str]]:
        return (
            frozenset(key.get(s, s) for s in srcs.get(n, ())),
            frozenset(key.get(d, d) for d in dsts.get(n, ())),
        )

    # Split each candidate group by where its members sit (neighbours seen through their own
    # groups) until no group splits any more: groups only ever split, so this ends.
    changed = True
    while changed:
        parts: dict[str, dict[tuple[frozenset[str], frozenset[str]], list[str]]] = {}
        for n in names:
            if key[n].startswith(_GROUP) and key[n] not in fixed:
                parts.setdefault(key[n], {}).setdefault(where(n), []).append(n)
        changed = False
        for k, split in parts.items():
            if len(split) > 1:
                changed = True
                for i, members in enumerate(split.values()):
                    key.update(dict.fromkeys(members, f"{k}{_GROUP}{i}"))
    return key


def _group(topo: Topology, own: tuple[str, ...], aliases: tuple[str, ...]) -> StageGroup:
    """The group of stages ``own`` (and their ``aliases``), with its channels in and out."""
    m = _NUMBERED.match(own[0])
    stem = m["stem"] if m is not None and (len(own) > 1 or aliases) else ""
    inside = {*own, *aliases}
    ins = tuple(
        dict.fromkeys(c.name for c, a, b in topo.links() if b in inside and a not in inside)
    )
    outs = tuple(
        dict.fromkeys(c.name for c, a, b in topo.links() if a in inside and b not in inside)
    )
    return StageGroup(range_label(own), own, stem, aliases, ins, outs)
