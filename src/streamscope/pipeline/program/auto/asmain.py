"""The program's own process under ``streamscope run prog.py``: watched, run as ``__main__``.

In: ``python -m streamscope.pipeline.program.auto.asmain [--parent PID] [-m] TARGET ARGS...`` with the
session in the environment (``pipeline.program.registry.SESSION_ENV``). Out: the program run as ``python
TARGET ARGS`` (``python -m TARGET ARGS``) would run it, its standard queues, threads and
processes watched (``pipeline.program.auto``); it ends through the interpreter's own ending (its threads
joined, its exit handlers and its ``multiprocessing`` finalizers run, its children joined), with
its own exit status, which the process that started it reads.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import functools
import itertools
import os
import runpy
import signal
import sys
import types
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import TracebackType

from streamscope.core.process import die_with_parent
from streamscope.pipeline.program import auto
from streamscope.pipeline.program.auto import costs
from streamscope.pipeline.program.auto.stages import leave
from streamscope.pipeline.program.registry import RAISED, REGISTRY, USED

#: Libraries a program may pass its items through that streamscope does not watch: the module
#: that says the program used it, and what it is.
UNWATCHED = (
    ("ray", "Ray (its actors, tasks and ray.util.queue.Queue)"),
    ("dask", "Dask"),
    (
        "joblib",
        "joblib's queues between the program and its workers (loky's: the workers are watched)",
    ),
    ("zmq", "ZeroMQ sockets"),
    ("mpi4py", "MPI"),
    ("gevent", "gevent"),
    ("trio", "trio"),
    ("multiprocessing.managers", "a multiprocessing Manager's proxies (Manager().Queue())"),
)
#: The files of the code that runs the program: this module's and runpy's (a frozen module's
#: code names no file of its own).
_RUNNERS = (__file__, runpy.__file__, runpy._run_code.__code__.co_filename)  # type: ignore[attr-defined]
#: streamscope's own package: its frames within the program's (a watched queue's, a join's)
#: are not the program's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _excepthook(
    module: bool, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    """Python's own report of an uncaught exception, with the program's frames only: a
    traceback of ``python prog.py`` starts in the program (of ``python -m NAME``, in runpy's
    two frames that run it) and goes through the standard library, not streamscope."""
    seen: set[int] = set()
    chained: BaseException | None = exc
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        first = chained is exc
        chained.__traceback__ = _programs(tb if first else chained.__traceback__, module)
        chained = chained.__cause__ or chained.__context__
    sys.__excepthook__(kind, exc, exc.__traceback__)
    if REGISTRY.directory is not None and not issubclass(kind, KeyboardInterrupt):
        with contextlib.suppress(OSError):
            Path(REGISTRY.directory, RAISED).write_text(f"{kind.__name__}: {exc}")


def _programs(tb: TracebackType | None, module: bool) -> TracebackType | None:
    """``tb`` without the frames that ran the program and, unless the exception came from
    streamscope's own code (then they say why), without streamscope's frames."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    start = 0
    while start < len(frames) and _file(frames[start]) in _RUNNERS:
        start += 1
    for _ in range(2 if module else 0):  # python -m NAME shows runpy's two that run NAME
        if start > 0 and _file(frames[start - 1]) != __file__:
            start -= 1
    kept = frames[start:]
    if kept and not _file(kept[-1]).startswith(_PACKAGE):
        kept = [f for f in kept if not _file(f).startswith(_PACKAGE)]
    for a, b in itertools.pairwise(kept):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _file(tb: TracebackType) -> str:
    return tb.tb_frame.f_code.co_filename


def _fresh_main() -> types.ModuleType:
    """A new ``__main__`` module, in place for good: objects the program defines are pickled
    by reference to it (``multiprocessing``), also by its threads after its code returned."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main


def run_path(path: str) -> None:
    """Run the file ``path`` as ``python PATH`` does (a directory or zip file with a
    ``__main__.py`` as ``runpy`` runs it)."""
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        runpy.run_path(path, run_name="__main__")
        return
    sys.path[0] = os.path.dirname(os.path.realpath(full))
    code = compile(Path(full).read_bytes(), full, "exec", dont_inherit=True)
    main = _fresh_main()
    main.__dict__.update(
        __file__=full, __loader__=SourceFileLoader("__main__", full), __cached__=None,
        __package__=None, __spec__=None, __annotations__={},
    )  # fmt: skip
    exec(code, main.__dict__)  # noqa: S102 - running the user's program is this module's job


def run_module(name: str) -> None:
    """Run the module ``name`` as ``python -m NAME`` does."""
    sys.path[0] = os.getcwd()
    _fresh_main()
    runpy._run_module_as_main(name, alter_argv=True)  # type: ignore[attr-defined]


def _tell_used() -> None:
    """At the program's exit: what watching it cost (``costs``), what of ``UNWATCHED`` it
    imported."""
    costs.told(REGISTRY.directory)
    used = [what for module, what in UNWATCHED if module in sys.modules]
    if REGISTRY.directory is not None and used:
        with contextlib.suppress(OSError):
            Path(REGISTRY.directory, USED).write_text("\n".join(used))


def main(args: list[str]) -> None:
    """``[--parent PID] [-m] TARGET ARGS...``: the program, watched. Its exceptions and
    ``SystemExit`` go on to the interpreter, which reports and ends as for ``python TARGET``.
    ``--parent``: the process that started it, which passes signals on to it; if that process
    is killed, so is the program (as ``kill -9`` of ``python TARGET`` would kill it)."""
    if args[:1] == ["--parent"]:
        die_with_parent(int(args[1]), signal.SIGKILL)
        args = args[2:]
    module = bool(args) and args[0] == "-m"
    target, *argv = args[1:] if module else args
    REGISTRY.adopt()
    atexit.register(_tell_used)  # first: so it runs last, once the program's own have run
    auto.install()
    sys.argv = [target, *argv]
    sys.excepthook = functools.partial(_excepthook, module)
    costs.started()
    try:
        if module:
            run_module(target)
        else:
            run_path(target)
    finally:
        leave()  # its main thread: its work over while the interpreter ends
        REGISTRY.thread_done()  # and that of the stages it worked in (a stream's nodes)


if __name__ == "__main__":
    main(sys.argv[1:])
