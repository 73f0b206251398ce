"""Imports go one way between layers, and the public surface is pinned."""

from __future__ import annotations

import ast
from pathlib import Path

import streamscope

SRC = Path(streamscope.__file__).parent
#: Higher may import lower, never the reverse (DESIGN.md: cli, runtime → monitor → ... → core).
#: ``reduction`` is what turns records into frames, wherever it runs (the monitor, a host, a
#: device); ``agents`` run it beside the program (a device's shipper, its sub-queues, a host).
RANK = {
    "core": 0,
    "transport": 1,
    "probes": 2,
    "aggregate": 3,
    "timebase": 3,
    "hw": 4,
    "store": 4,
    "query": 4,
    "model": 4,
    "reduction": 5,
    "agents": 6,
    "pipeline": 7,
    "analysis": 8,
    "report": 9,
    "export": 9,
    "monitor": 10,
    "runtime": 11,
    "cli": 12,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = ["streamscope", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


def _is_module(name: str) -> bool:
    """A module of ours, Python or compiled (``core/_native*.so``)."""
    if name in MODULES:
        return True
    parent, _, leaf = name.rpartition(".")
    return parent in MODULES and any(MODULES[parent].parent.glob(f"{leaf}.*.so"))


def _type_only(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: names for annotations, never imported at run time."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names, relative forms (``from ..x import y``) too."""
    if not node.level:
        return node.module or ""
    here = _module_name(path).split(".")
    base = here if path.name == "__init__.py" else here[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _import_targets(path: Path, *, type_only: bool = True) -> list[tuple[str, str]]:
    """Every ``(module, name)`` of ours that ``path`` imports, in every form: ``import
    streamscope.x.y``, ``from streamscope.x import y``, ``from streamscope import x``, relative
    imports, and ``importlib.import_module`` or lazy ``"streamscope.x.y:Name"`` strings.
    ``name`` is what is taken from the module (``""`` for the module itself)."""
    tree = ast.parse(path.read_text())
    skip = set() if type_only else _type_only(tree)
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(path, node)
            for a in node.names:
                sub = f"{mod}.{a.name}"
                found.append((sub, "") if _is_module(sub) else (mod, a.name))
        elif isinstance(node, ast.Import):
            found.extend((a.name, "") for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            mod, _, name = node.value.partition(":")
            if mod in MODULES and mod.startswith("streamscope."):
                found.append((mod, name))
    return [(m, n) for m, n in found if m == "streamscope" or m.startswith("streamscope.")]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    """The layers ``path`` imports from (``from streamscope import store`` names one too)."""
    out: set[str] = set()
    for mod, name in _import_targets(path):
        layer = _layer(mod) or (name if name in RANK else None)
        if layer is not None:
            out.add(layer)
    return out


def test_every_form_of_import_is_seen() -> None:
    """The checks below would miss an upward import written in any form they cannot read."""
    probe = SRC / "query" / "__probe__.py"
    forms = [
        "from ..store import reader",
        "from .. import store",
        "from streamscope import store",
        "import streamscope.store.reader",
        "from streamscope.store.reader import load",
        "importlib.import_module('streamscope.store.reader')",
        "LAZY = {'load': 'streamscope.store.reader:load'}",
    ]
    try:
        for form in forms:
            probe.write_text(form + "\n")
            assert "store" in _imports(probe), form
    finally:
        probe.unlink(missing_ok=True)


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


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (module -> modules it imports), or ``[]``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return [*path[path.index(d) :], d]
            if d not in state and (found := visit(d)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_no_import_circles_between_modules() -> None:
    """No module imports, at run time and by any path, one that imports it back (a package's
    ``__init__`` re-exporting its modules is not a circle; imports for annotations only are
    not imports)."""
    graph = {
        mod: {
            m for m, _ in _import_targets(path, type_only=False)
            if m in MODULES and m != mod and MODULES[m].name != "__init__.py"
        }
        for mod, path in MODULES.items()
        if path.name != "__init__.py"
    }  # fmt: skip
    assert _cycle(graph) == []
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_private_name_crosses_modules() -> None:
    """A name with a leading underscore stays in its module; a private module (``_x.py``)
    serves only its own package."""
    bad = []
    for mod, path in MODULES.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for target, name in _import_targets(path):
            leaf = target.rpartition(".")[2]
            if name.startswith("_") and target != mod and name != "__version__":
                bad.append(f"{mod} imports {name} from {target}")
            elif (
                leaf.startswith("_")
                and not leaf.startswith("__")
                and target.rpartition(".")[0] != package
            ):
                bad.append(f"{mod} imports the private module {target}")
    assert not bad, "\n".join(bad)


#: The extras' modules, and the packages of ours that may import each as they are imported:
#: Ray (``[hosts]``) none (runtime/cluster.py sets its environment before importing it, inside
#: the functions that need it); Amaranth (``[hw]``) only the probe cores' own package.
_EXTRAS = {"ray": (), "amaranth": ("streamscope.hw",)}


def _import_time(path: Path) -> set[str]:
    """Every module that importing ``path`` imports at once (not in a function's body, not for
    annotations only), with the packages above each (importing ``a.b.c`` runs ``a`` and
    ``a.b`` first); modules not ours too (``ray``, ``amaranth.hdl``)."""
    tree = ast.parse(path.read_text())
    skip = _type_only(tree)
    found: set[str] = set()
    later = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda  # bodies run when called

    def visit(node: ast.AST) -> None:
        if id(node) in skip or isinstance(node, later):
            return
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(path, node)
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 2)}


def _needs(module: str, extra: str) -> bool:
    """Whether importing ``module`` needs ``extra`` by itself: one of its modules, or one of
    ours that only it may import (streamscope.hw asks for Amaranth as it is imported)."""
    return module.partition(".")[0] == extra or any(
        module == room or module.startswith(room + ".") for room in _EXTRAS[extra]
    )


def _extra_path(start: str, extra: str, graph: dict[str, set[str]]) -> list[str]:
    """The chain of import-time imports from ``start`` to a module that needs ``extra``, or
    ``[]`` (breadth first: the shortest)."""
    came: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        mod = todo.pop(0)
        for dep in sorted(graph.get(mod, ())):
            if dep in came:
                continue
            came[dep] = mod
            if _needs(dep, extra):
                chain = [dep]
                while chain[-1] != start:
                    chain.append(came[chain[-1]])
                return chain[::-1]
            todo.append(dep)
    return []


def test_the_extras_are_imported_only_where_needed() -> None:
    """A plain install (no ``[hosts]``, no ``[hw]``) imports every module but the probe cores'
    package: none imports Ray or Amaranth as it is imported, by any path, outside its room.
    (tests/integration/test_extras.py runs it so.)"""
    graph = {mod: _import_time(path) for mod, path in MODULES.items()}
    assert _extra_path("streamscope.hw.storage", "amaranth", graph)[-1].startswith("amaranth")
    assert _extra_path("streamscope.cli", "amaranth", graph) == []  # hw commands import late
    bad = [
        f"{mod} imports {extra} as it is imported: {' -> '.join(chain)}"
        for extra in _EXTRAS
        for mod in sorted(MODULES)
        if not _needs(mod, extra) and (chain := _extra_path(mod, extra, graph))
    ]
    assert not bad, "\n".join(bad)


def test_public_surface_is_pinned() -> None:
    assert sorted(streamscope.__all__) == sorted(
        [
            "Asyncio", "ConfigError", "EmulatedDevice", "Host", "MPQueue", "Pipeline", "PipelineError", "Process",
            "Query", "QueryError", "Queue", "Run", "RunFileError", "RunOptions", "RunResult", "StageError",
            "StreamscopeError", "StreamscopeWarning", "__version__", "count", "counter", "input_wait", "interdeparture",
            "interinsertion", "iteration", "output_wait", "probe", "sample", "timer", "tracing",
            "latency", "load", "monitor", "occupancy", "parse_query", "run", "stage", "state",
            "throughput", "watch",
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


def test_the_version_is_written_once() -> None:
    """The package, its metadata and the run files take the version from ``core/version.py``."""
    import tomllib

    from streamscope.core.version import VERSION

    root = SRC.parent.parent
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    dynamic = meta["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "streamscope.core.version.VERSION"}
    written = [
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if f'"{VERSION}"' in p.read_text()
    ]
    assert written == ["core/version.py"]
    assert streamscope.__version__ == VERSION


#: Calls whose result is state that changes while a process runs.
_MUTABLE_CALLS = {
    "dict", "list", "set", "local", "Lock", "RLock", "Event", "Condition", "defaultdict",
    "deque", "count", "WeakSet", "WeakValueDictionary", "WeakKeyDictionary", "Registry",
}  # fmt: skip


def _module_state(path: Path) -> list[tuple[int, str]]:
    """Names a module binds to state that changes as the process runs: empty containers,
    locks, thread-locals, registries, and names its functions rebind (``global``)."""
    tree = ast.parse(path.read_text())
    rebound = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}
    out = []
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        value = node.value
        empty = isinstance(value, ast.Dict | ast.List | ast.Set) and not (
            value.keys if isinstance(value, ast.Dict) else value.elts
        )
        func = value.func if isinstance(value, ast.Call) else None
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if empty or called in _MUTABLE_CALLS or any(n in rebound for n in names):
            out.extend((node.lineno, n) for n in names)
    return out


def test_process_wide_state_says_why() -> None:
    """Module-level state is shared by everything in a process (SimPy keeps its clock in the
    environment for that reason): each such name is documented, in the ``#:`` comment above
    it, as process-wide and why it must be."""
    bad = []
    for path in SRC.rglob("*.py"):
        lines = path.read_text().splitlines()
        state = _module_state(path)
        grouped = {n for n, _ in state}  # a comment may say it of a run of such lines
        for lineno, name in state:
            above = []
            i = lineno - 2
            while i >= 0 and i + 1 in grouped:
                i -= 1
            while i >= 0 and lines[i].lstrip().startswith(("#:", "# ")):
                above.append(lines[i])
                i -= 1
            if not any("process" in line.lower() for line in above):
                bad.append(f"{path.relative_to(SRC)}:{lineno} {name}")
    assert not bad, "undocumented process-wide state:\n" + "\n".join(bad)


def test_queries_are_compiled_once_per_run() -> None:
    """A run's queries are compiled in one place for each way a run starts — a pipeline's
    (``session.prepare``), a program's (``instrument.program_plan``), a finished run's file
    reduced again (``retime``) — and the plan goes on whole: the command line's live view, the
    session and the monitor process (which reads it from its config) share it."""
    calls = set()
    for mod, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "compile_queries"
                ):
                    calls.add(f"{mod}.{fn.name}")
    assert calls == {
        "streamscope.runtime.session.prepare",
        "streamscope.runtime.instrument.program_plan",
        "streamscope.monitor.retime.retime",
    }
