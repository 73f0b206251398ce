"""Loading an application file: ``APP.py`` in, its ``Pipeline`` (and default queries) out.

An app file defines ``pipeline(argv: list[str]) -> Pipeline`` (or a module-level ``pipeline``
object) and may define ``QUERIES``, a list of query strings used when none are given.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from streamscope.core.errors import (
    AppError,
    ConfigError,
    MissingExtraError,
    PipelineError,
    StreamscopeError,
    describe_exception,
)

if TYPE_CHECKING:
    from streamscope.pipeline.describe.pipeline import Pipeline

APP_MODULE = "__streamscope_app__"
HINT = "define `def pipeline(argv: list[str]) -> streamscope.Pipeline` in it"


def is_app(path: Path) -> bool:
    """Whether the file is a streamscope app: it defines ``QUERIES`` (streamscope's own name: an
    app whose pipeline may be missing, which loading it then says), or it uses streamscope
    (imports it, anywhere in the file) and defines ``pipeline``, at its top level; read
    without running it. Any other program is run as it is (``runtime/program.py``), whatever
    its names: ``pipeline`` is a common name for a program's own helper, and a file that never
    imports streamscope cannot build a ``streamscope.Pipeline``."""
    if not path.is_file():
        raise ConfigError(f"app file {path} does not exist")
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise AppError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except ValueError as exc:  # null bytes
        raise AppError(f"{path}: not Python source ({exc})") from None
    names = _top_names(tree)
    return "QUERIES" in names or ("pipeline" in names and _uses_streamscope(tree))


def _top_names(tree: ast.Module) -> set[str]:
    """Which of ``pipeline`` and ``QUERIES`` are defined, assigned or imported at the top."""
    names = {"pipeline", "QUERIES"}
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            found.add(node.name)
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AnnAssign) else []
        )  # fmt: skip
        found.update(t.id for t in targets if isinstance(t, ast.Name) and t.id in names)
        if isinstance(node, ast.ImportFrom | ast.Import):
            found.update(a.asname or a.name for a in node.names if (a.asname or a.name) in names)
    return found


def _uses_streamscope(tree: ast.Module) -> bool:
    """Whether the file imports streamscope (or a module of it) anywhere."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "streamscope" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "streamscope":
            return True
    return False


def load_module(path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigError(f"app file {path} does not exist")
    spec = importlib.util.spec_from_file_location(APP_MODULE, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[APP_MODULE] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise AppError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except MissingExtraError:
        raise  # an app that builds its pipeline as it is loaded: the extra is the whole story
    except Exception as exc:
        raise AppError(f"{path} could not be loaded: {describe_exception(exc)}") from None
    return module


def build_pipeline(module: ModuleType, path: Path, argv: list[str]) -> Pipeline:
    """Call the app's ``pipeline(argv)``. ``SystemExit`` from its argument parser passes through."""
    from streamscope.pipeline.describe.pipeline import Pipeline  # an app's, not a program's

    obj: Any = getattr(module, "pipeline", None)
    if obj is None:
        raise PipelineError(f"{path} has no pipeline: {HINT}")
    if isinstance(obj, Pipeline):
        if argv:
            raise ConfigError(
                f"{path} defines a fixed pipeline object, which takes no arguments; {HINT}"
            )
        return obj
    if not callable(obj):
        raise PipelineError(f"{path}: `pipeline` is a {type(obj).__name__}; {HINT}")
    try:
        result = obj(list(argv))
    except (SystemExit, KeyboardInterrupt):
        raise
    except StreamscopeError:
        raise
    except Exception as exc:
        raise AppError(f"{path}: pipeline(argv) raised {describe_exception(exc)}") from None
    if not isinstance(result, Pipeline):
        raise PipelineError(
            f"{path}: pipeline(argv) returned {type(result).__name__}, not a streamscope.Pipeline"
        )
    return result


def default_queries(module: ModuleType, path: Path) -> list[str]:
    queries = getattr(module, "QUERIES", [])
    if not isinstance(queries, list | tuple) or not all(isinstance(q, str) for q in queries):
        raise ConfigError(f"{path}: QUERIES must be a list of query strings")
    return list(queries)
