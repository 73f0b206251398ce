"""The program's own process under ``streamscope run prog.py``: watched, run as ``__main__``.

In: ``python -m streamscope.pipeline.auto.asmain [-m] TARGET ARGS...`` with the session in the
environment (``pipeline.registry.SESSION_ENV``). Out: the program run as ``python TARGET ARGS``
(``python -m TARGET ARGS``) would run it, its standard queues, threads and processes watched
(``pipeline.auto``); it ends through the interpreter's own ending (its threads joined, its exit
handlers and its ``multiprocessing`` finalizers run, its children joined), with its own exit
status, which the process that started it reads.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import os
import runpy
import sys
import types
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import TracebackType

from streamscope.pipeline import auto
from streamscope.pipeline.auto.stages import leave
from streamscope.pipeline.registry import REGISTRY

#: The file, in the session's ring directory, where the program's uncaught exception is told
#: (``Type: message``) to the process that started it.
RAISED = "program.raised"
#: The file, in the session's ring directory, where the program's process lists what it used
#: that streamscope does not watch (``UNWATCHED``), one per line, as it ends.
USED = "program.used"
#: Libraries a program may pass its items through that streamscope does not watch: the module
#: that says the program used it, and what it is.
UNWATCHED = (
    ("ray", "Ray (its actors, tasks and ray.util.queue.Queue)"),
    ("dask", "Dask"),
    ("joblib", "joblib's workers"),
    ("zmq", "ZeroMQ sockets"),
    ("mpi4py", "MPI"),
    ("gevent", "gevent"),
    ("trio", "trio"),
    ("multiprocessing.managers", "a multiprocessing Manager's proxies (Manager().Queue())"),
)
#: Files whose frames a traceback of the program leaves out (they are not the program's).
_OURS = (__file__, runpy.__file__)


def _excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Python's own report of an uncaught exception, without the frames that ran the program
    (a traceback of ``python prog.py`` starts in the program)."""
    while tb is not None and tb.tb_frame.f_code.co_filename in _OURS:
        tb = tb.tb_next
    sys.__excepthook__(kind, exc, tb)
    if REGISTRY.directory is not None and not issubclass(kind, KeyboardInterrupt):
        with contextlib.suppress(OSError):
            Path(REGISTRY.directory, RAISED).write_text(f"{kind.__name__}: {exc}")


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
    """At the program's exit: what of ``UNWATCHED`` it imported."""
    used = [what for module, what in UNWATCHED if module in sys.modules]
    if REGISTRY.directory is not None and used:
        with contextlib.suppress(OSError):
            Path(REGISTRY.directory, USED).write_text("\n".join(used))


def main(args: list[str]) -> None:
    """``[-m] TARGET ARGS...``: the program, watched. Its exceptions and ``SystemExit`` go on
    to the interpreter, which reports and ends as for ``python TARGET``."""
    module = bool(args) and args[0] == "-m"
    target, *argv = args[1:] if module else args
    REGISTRY.adopt()
    atexit.register(_tell_used)  # first: so it runs last, once the program's own have run
    auto.install()
    sys.argv = [target, *argv]
    sys.excepthook = _excepthook
    try:
        if module:
            run_module(target)
        else:
            run_path(target)
    finally:
        leave()  # its main thread: idle while the interpreter ends


if __name__ == "__main__":
    main(sys.argv[1:])
