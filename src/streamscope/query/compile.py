"""Queries (text or :class:`Query`) and a :class:`Topology` in; a :class:`Plan` out: the taps to
activate and, per query and matched target, the aggregation specs. Everything is checked first.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from fnmatch import fnmatchcase

from streamscope.aggregate.specs import Mean
from streamscope.core.errors import ConfigError, QueryError
from streamscope.core.topology import ChannelInfo, Topology, path_ends
from streamscope.query.aggspecs import query_specs
from streamscope.query.ast import Edge, Origin, Path, Query, StatAgg
from streamscope.query.defaults import read_default
from streamscope.query.metrics import METRICS
from streamscope.query.plan import CompiledQuery, Plan, TargetPlan

__all__ = ["compile_queries"]


#: The shortest frame a query may ask for. The monitor drains the rings every 20 ms and closes
#: every frame the watermark passed; below this, the frames' own results (one per query and
#: target and frame) cost more than the records they reduce.
MIN_FRAME_NS = 10_000_000


def _ns(ns: int) -> str:
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= size and ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def compile_queries(
    queries: Sequence[Query | str] | str,
    topology: Topology,
    default_frame_ns: int,
    *,
    open_world: bool = False,
    follow: bool = True,
) -> Plan:
    """Check every query against ``topology`` and resolve its targets, frame and specs.

    ``queries`` holds one query per item (text or :class:`Query`); a single string is read as
    a queries file (one per line, ``#`` comments).

    Raises :class:`QueryError` (with line and column) for the first bad query; nothing is
    returned unless all are valid. ``default_frame_ns`` (> 0) applies where no ``every`` is given.

    ``open_world``: stages and channels may appear while the run goes on (a program monitored
    through the drop-in API), so a name that matches nothing yet is not an error: its query
    starts with the targets that exist and gains the others as they appear
    (:func:`new_targets`). Stage queries then match only ``topology``'s stages, not the names
    channels give their ends (a stage exists once a thread has worked in it).

    ``follow``: items can be followed from stage to stage (``latency(SRC ~> DST)``); False
    for a program, whose queues carry its items, not streamscope's channels.
    """
    if default_frame_ns <= 0:
        raise ConfigError(f"default frame must be greater than zero, got {default_frame_ns} ns")
    if default_frame_ns < MIN_FRAME_NS:
        raise ConfigError(
            f"default frame {_ns(default_frame_ns)} is shorter than the monitor can close: "
            f"frames must be at least {_ns(MIN_FRAME_NS)}"
        )
    if isinstance(queries, str):
        from streamscope.query.parser import parse_queries

        queries = parse_queries(queries)
    compiled = [
        _compile_one(i, q, topology, default_frame_ns, open_world, follow)
        for i, q in enumerate(queries)
    ]
    taps = frozenset(
        (kind, target.name)
        for cq in compiled
        if not isinstance(cq.query.target, Path)
        for target in cq.targets
        for kind in METRICS[cq.metric].taps
    ) | frozenset(tap for cq in compiled for tap in path_taps(cq, topology))
    return Plan(tuple(compiled), taps, open_world)


#: What a path's channels are given: tags leave at its origin's channels (``depart``: the
#: channels out of its first stage), arrive at its end's (``arrive``: the channels into its
#: last stage), and every channel on it carries them (``carry``).
PATH_TAPS = ("depart", "arrive", "carry")


def path_taps(cq: CompiledQuery, topology: Topology) -> list[tuple[str, str]]:
    """The taps a path query's targets need on their channels (``PATH_TAPS``); a path whose
    items are not followed (its mean from Little's law) needs the ends of its channels and of
    the channels into its inner stages, and its inner stages' states (``little_parts``)."""
    if not isinstance(cq.query.target, Path):
        return []
    out = []
    for t in cq.targets:
        src, dst = path_ends(t.name)
        if t.littles:
            channels, stages = little_parts(topology, src, dst)
            out += [(end, c) for c in channels for end in ("tail", "head")]
            out += [("state", s) for s in stages]
            continue
        for c in topology.route(src, dst):
            out.append(("carry", c.name))
            if c.src == src:
                out.append(("depart", c.name))
            if c.dst == dst:
                out.append(("arrive", c.name))
    return out


def little_parts(topology: Topology, src: str, dst: str) -> tuple[list[str], list[str]]:
    """What Little's law over the path ``src ~> dst`` counts: the channels on it and every
    channel into its inner stages (the stages' rates of taking items), and its inner stages."""
    route = topology.route(src, dst)
    inner = sorted({c.dst for c in route} - {dst})
    channels = [c.name for c in topology.channels if c in route or c.dst in inner]
    return channels, inner


def unfollowed(topology: Topology, route: Sequence[ChannelInfo]) -> str:
    """Why items cannot be followed along ``route`` ("" when tags ride on every channel of
    it): threads' FIFOs, channels between a pipeline's processes, a device's link and a link
    between cluster hosts carry them; an event loop's tasks (many on one thread) do not."""
    kinds = {r.name: r.kind for r in topology.resources}
    where = {s.name: s.resource for s in topology.stages}
    for c in route:
        for s in (c.src, c.dst):
            if kinds.get(where.get(s, "")) == "asyncio":
                return f"stage '{s}' is a task of an event loop"
        if c.transport not in ("thread", "process", "link"):
            return f"channel '{c.name}' is carried by {c.transport}"
    return ""


def _on_hosts(topology: Topology, route: Sequence[ChannelInfo]) -> str:
    """A channel of ``route`` with an end on a cluster host ("" if none): its records are
    reduced there, so Little's law over the path has none of them."""
    kinds = {r.name: r.kind for r in topology.resources}
    where = {s.name: s.resource for s in topology.stages}
    for c in route:
        if any(kinds.get(where.get(s, "")) == "host" for s in (c.src, c.dst)):
            return c.name
    return ""


def _parse_query(text: str, *, source: str) -> Query:
    """``parser.parse_query``, Lark loaded only where a query's text is read (the monitor
    follows new targets with a plan's parsed queries, and never loads it; the defaults are
    read without it)."""
    known = read_default(text, source)
    if known is not None:
        return known
    from streamscope.query.parser import parse_query

    return parse_query(text, source=source)


def _compile_one(
    index: int,
    item: Query | str,
    topology: Topology,
    default_frame_ns: int,
    open_world: bool,
    follow: bool = True,
) -> CompiledQuery:
    source = f"query {index + 1}"
    if isinstance(item, str):
        query = _parse_query(item, source=source)
        origin = query.origin
    else:
        # Reading the canonical text back checks a hand-built query by the parser's rules.
        reread = _parse_query(str(item), source=source)
        query = item if reread == item else reread
        origin = item.origin if _origin_fits(item) else reread.origin
    assert origin is not None
    info = METRICS[query.metric]
    resolver = _Resolver(topology, origin, open_world, follow)
    littles: dict[str, bool] = {}
    if isinstance(query.target, Path):
        channels = []
        mean_only = all(isinstance(a, StatAgg) and a.name == "mean" for a in query.aggregations)
        littles = dict(resolver.paths(query.target, mean_only))
        names = tuple(littles)
    elif isinstance(query.target, Edge):
        channels = resolver.channels(query.target)
        names = tuple(c.name for c in channels)
    elif info.probe:
        channels = []
        names = resolver.probes(query.target.name, info.probe, query.metric)
    else:
        channels = []
        names = resolver.stages(query.target.name, 0)
    specs = query_specs(query, channels, origin)
    mean = (Mean(),)
    if query.frame_ns is not None and query.frame_ns < MIN_FRAME_NS:
        col = origin.text.find(" every ") + 2 if " every " in origin.text else 1
        raise QueryError(
            f"frame {_ns(query.frame_ns)} is shorter than the monitor can close: frames must "
            f"be at least {_ns(MIN_FRAME_NS)}",
            text=origin.text, line=origin.line, column=col, source=origin.source,
        )  # fmt: skip
    return CompiledQuery(
        id=index,
        query=query,
        text=str(query),
        metric=query.metric,
        unit=info.unit,
        frame_ns=query.frame_ns if query.frame_ns is not None else default_frame_ns,
        targets=tuple(
            TargetPlan(name, mean, True) if littles.get(name) else TargetPlan(name, specs)
            for name in names
        ),
    )


def _origin_fits(query: Query) -> bool:
    return query.origin is not None and query.origin.target == query.target


class _Resolver:
    """Matches name patterns against the topology; errors point at the pattern in the query."""

    def __init__(
        self, topology: Topology, origin: Origin, open_world: bool = False, follow: bool = True
    ) -> None:
        self.topology = topology
        self.origin = origin
        self.open_world = open_world
        self.follow = follow
        known = [s.name for s in topology.stages]
        if not open_world:
            for c in topology.channels:
                known += [c.src, c.dst]
        self.known = tuple(dict.fromkeys(known))

    def error(self, message: str, which: int) -> QueryError:
        o = self.origin
        return QueryError(
            message, text=o.text, line=o.line, column=o.columns[which], source=o.source
        )

    def stages(self, pattern: str, which: int) -> tuple[str, ...]:
        matched = tuple(name for name in self.known if fnmatchcase(name, pattern))
        if not matched and not self.open_world:
            known = ", ".join(self.known) or "(none)"
            if any(ch in pattern for ch in "*?["):
                message = f"no stage matches '{pattern}'; known stages: {known}"
            else:
                message = f"unknown stage '{pattern}'; known stages: {known}"
                close = difflib.get_close_matches(pattern, self.known, n=1)
                message += f"; did you mean '{close[0]}'?" if close else ""
            raise self.error(message, which)
        return matched

    def probes(self, pattern: str, kind: str, metric: str) -> tuple[str, ...]:
        """Declared probes of ``kind`` whose ``STAGE.NAME`` matches ``pattern``."""
        declared = [p.name for p in self.topology.user_probes if p.kind == kind]
        matched = tuple(name for name in declared if fnmatchcase(name, pattern))
        if matched or self.open_world:
            return matched
        known = ", ".join(declared) or "(none: declare one with Pipeline.probe)"
        other = [p for p in self.topology.user_probes if fnmatchcase(p.name, pattern)]
        if other:
            message = f"{metric} needs a {kind} probe, but '{pattern}' is a {other[0].kind} probe"
        elif any(ch in pattern for ch in "*?["):
            message = f"no {kind} probe matches '{pattern}'; {kind} probes: {known}"
        else:
            message = f"unknown {kind} probe '{pattern}'; {kind} probes: {known}"
            close = difflib.get_close_matches(pattern, declared, n=1)
            message += f"; did you mean '{close[0]}'?" if close else ""
        raise self.error(message, 0)

    def paths(self, path: Path, mean_only: bool) -> tuple[tuple[str, bool], ...]:
        """``SRC ~> DST`` for each pair of matched stages with a way between them, and whether
        its items cannot be followed (then its mean comes from Little's law over the path):
        they are followed through a pipeline's threads and processes and over a device's link,
        not in a program's queues or through an event loop's tasks. ``mean_only``:
        the query asks for the mean alone (what Little's law gives)."""
        if not self.follow:
            # A program's stages and queues appear as it runs: the names are taken as written.
            for which, name in enumerate((path.src, path.dst)):
                if any(ch in name for ch in "*?["):
                    raise self.error(
                        f"a program's path names its two stages, not a pattern ('{name}')", which
                    )
            self._littles(path.src, path.dst, "its queues carry them, not streamscope's "
                          "channels", mean_only)  # fmt: skip
            return ((f"{path.src} ~> {path.dst}", True),)
        out = []
        for src in self.stages(path.src, 0):
            for dst in self.stages(path.dst, 1):
                route = self.topology.route(src, dst)
                if not route:
                    continue
                why = unfollowed(self.topology, route)
                hosted = _on_hosts(self.topology, route) if why else ""
                if hosted:
                    raise self.error(
                        f"the items from '{src}' to '{dst}' cannot be followed ({why}), and "
                        f"Little's law over the path needs records a cluster host keeps "
                        f"(channel '{hosted}'): each channel's latency(SRC -> DST) is "
                        "measured everywhere",
                        0,
                    )
                if why:
                    self._littles(src, dst, why, mean_only)
                out.append((f"{src} ~> {dst}", bool(why)))
        if not out and not self.open_world:
            raise self.error(f"no way from '{path.src}' to '{path.dst}' through the channels", 0)
        return tuple(out)

    def _littles(self, src: str, dst: str, why: str, mean_only: bool) -> None:
        """A path whose items cannot be followed gives its mean only (Little's law): refuse
        any other statistic, saying why."""
        if not mean_only:
            raise self.error(
                f"the items from '{src}' to '{dst}' cannot be followed ({why}): only the mean "
                f"latency along the path is known, from Little's law; ask "
                f"latency({src} ~> {dst}): mean",
                0,
            )

    def channels(self, edge: Edge) -> list[ChannelInfo]:
        found = [
            c
            for c in self.topology.channels
            if fnmatchcase(c.src, edge.src) and fnmatchcase(c.dst, edge.dst)
        ]
        if self.open_world:
            return found
        self.stages(edge.src, 0)
        self.stages(edge.dst, 1)
        if not found:
            listed = ", ".join(c.name for c in self.topology.channels) or "(none)"
            raise self.error(f"no channel from '{edge.src}' to '{edge.dst}'; channels: {listed}", 0)
        return found
