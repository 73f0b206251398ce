"""Imports go one way between layers, and the public surface is pinned."""

from __future__ import annotations

import ast
from pathlib import Path

import streamscope

SRC = Path(streamscope.__file__).parent
#: Higher may import lower, never the reverse (DESIGN.md: cli, runtime → monitor → ... → core).
RANK = {
    "core": 0,
    "transport": 1,
    "probes": 2,
    "aggregate": 3,
    "timebase": 3,
    "store": 4,
    "pipeline": 5,
    "query": 6,
    "model": 6,
    "analysis": 7,
    "report": 8,
    "export": 8,
    "monitor": 9,
    "runtime": 10,
    "cli": 11,
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("streamscope.")
        ):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.split(".")[1] for a in node.names if a.name.startswith("streamscope.")
            )
    return found


def test_layers_import_only_downwards() -> None:
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if len(rel.parts) < 2:
            continue  # the package root re-exports the public surface
        layer = rel.parts[0]
        assert layer in RANK, f"{rel}: new layer {layer!r} needs a place in RANK"
        for dep in _imports(path):
            if dep != layer and RANK[dep] >= RANK[layer]:
                bad.append(f"{rel} imports streamscope.{dep}")
    assert not bad, "\n".join(bad)


def test_public_surface_is_pinned() -> None:
    assert sorted(streamscope.__all__) == sorted(
        [
            "Asyncio", "ConfigError", "EmulatedDevice", "MPQueue", "Pipeline", "PipelineError", "Process",
            "Query", "QueryError", "Queue", "Run", "RunFileError", "RunOptions", "RunResult", "StageError",
            "StreamscopeError", "StreamscopeWarning", "__version__", "count", "counter", "input_wait", "interdeparture",
            "interinsertion", "iteration", "output_wait", "probe", "sample", "timer", "tracing",
            "latency", "load", "monitor", "occupancy", "parse_query", "run", "stage", "state",
            "throughput",
        ]
    )  # fmt: skip
    for name in streamscope.__all__:
        assert hasattr(streamscope, name), name


def test_every_module_says_what_it_is_for() -> None:
    missing = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not missing, missing
