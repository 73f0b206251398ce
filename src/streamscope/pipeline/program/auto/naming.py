"""Which stage a worker of a program run as it is works for, and what that stage is called.

In: a worker (a thread, a process's main thread, an asyncio task) as the program started it: its
name, its target and the target's arguments; then its first queue operation. Out: its stage. A
stage is what a worker does, not which function it started in: workers that run the same code
and take from the same queue (or, if they never take, put into the same one) are one stage (a
pool); the same code on other queues is another stage. A stage is named, in this order, by

- ``given``: the name the program gave its thread, process or task (``Thread(name="resize-1")``:
  ``resize``, a trailing worker number dropped), never a default like ``Thread-3 (worker)``;
- ``function``: the program's own function the worker runs: a callable among the target's
  arguments (``Thread(target=worker, args=(resize, q1, q2))``: ``resize``) or, for a library's
  worker object, among its attributes (pypeln's ``Worker``: the function given to ``map``), else
  the target itself when it is the program's own;
- ``target``: the target, when it is a library's and nothing of the program's is found;
- ``place``: any of these, numbered (``worker #2``) when another stage already has the name,
  in the order the stages appeared in the flow.

Stages are claimed in the session's claim table (``claims``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import site
import sys
import sysconfig
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

#: How a stage's name was found (``StageInfo.named_by``), and the main thread's own.
GIVEN, FUNCTION, TARGET, PLACE, MAIN_THREAD = "given", "function", "target", "place", "main"
#: A worker number at the end of a given name (``resize-2``, ``io_0``), dropped from the stage's.
_NUMBERED = re.compile(r"(.+?)[-_ #.:]\d+")
_DEFAULT_THREAD = re.compile(r"(Thread|Dummy)-\d+( \(.*\))?|MainThread")
_DEFAULT_TASK = re.compile(r"Task-\d+")
#: How far into what a library's worker carries the program's function is looked for, and how
#: many values at most are looked at.
_DEPTH, _LOOKS = 4, 96
#: ... and how far and how many for the queues a worker was handed (a library's worker object
#: keeps them a level or two further down: mpire's in its communications object).
_QUEUE_DEPTH, _QUEUE_LOOKS = 6, 256
#: How many of a tuple's or list's items are looked at.
_ITEMS = 8
#: Values that neither are a queue nor hold one: passed over before any look (a thread handed
#: a queue and a list of 500 numbers looked into the first eight: its start took 15-16 us
#: where it takes 9-10).
_PLAIN = frozenset({int, float, complex, bool, str, bytes, type(None)})


@dataclass(frozen=True, slots=True)
class Who:
    """What a worker was started as: the name its stage would have (``base``), how it was
    found (``how``), what makes two workers' code the same (``ident``), and the queues it was
    handed (``slots``: each argument's place and the queue's id): workers of the same code
    handed the same queue in the same place are one stage, whichever queue they use first
    (a DataLoader's workers, each fed by its own index queue, all put into one)."""

    base: str
    how: str
    ident: str
    slots: tuple[tuple[str, str], ...] = ()
    #: Named after its own target (the program's function, nothing of the program's among its
    #: arguments): what the target holds once it runs may say better what it does (``refined``).
    own: bool = False


def refined(who: Who) -> Who:
    """``who`` at its worker's first queue operation: a worker named after its own target is
    named after the program's function its target's frame holds by then, if any (a generic
    ``stage(j, name)`` loop that looked its step up: the step), that function then telling
    its code apart from the other workers of the target."""
    if not who.own:
        return who
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}" == who.ident:
            for value in list(frame.f_locals.values()):
                if _candidate(value) and _ident(value) != who.ident:
                    return replace(who, base=function_name(value), ident=_ident(value), own=False)
            return who
        frame = frame.f_back
    return who


#: The program's main thread's (its stage is ``main``).
MAIN_WHO = Who("main", MAIN_THREAD, "main")


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """Directories whose code is not the program's: the standard library, installed packages
    (this environment's and the base interpreter's) and streamscope."""
    roots = {str(Path(__file__).resolve().parents[2])}
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars or None)
        roots.update(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    with contextlib.suppress(AttributeError):
        roots.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        roots.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


def read_interpreter() -> None:
    """What naming reads of this interpreter once (``_library_roots``), read now, by the
    thread that installs the watching: read first by one of the program's threads, it imported
    sysconfig's data there, and a pool forked meanwhile could copy that import's lock held,
    its workers then waiting on it forever (a pool of ``pool_rounds.py`` hung 1 run in 4
    beside a busy core)."""
    _library_roots()


#: The file name of code that cloudpickle carried to this process by value (a function of
#: the program's ``__main__``, as joblib's loky workers get it): only the program's code is
#: carried so, a library's goes by reference.
_CARRIED = "<dynamic-code>"


@functools.lru_cache(maxsize=1024)
def _program_file(filename: str) -> bool:
    if filename == _CARRIED:
        return True
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    return not any(real.startswith(root) for root in _library_roots())


def _code(fn: Any) -> types.CodeType | None:
    """The code a callable runs first (a function's, a method's, a partial's, a callable
    object's ``__call__``)."""
    for _ in range(4):
        while isinstance(fn, functools.partial):
            fn = fn.func
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType):
            return code
        calls = () if isinstance(fn, type) else type(fn).__mro__
        call = next((k.__dict__["__call__"] for k in calls if "__call__" in k.__dict__), None)
        fn = getattr(fn, "__func__", None) or call
        if fn is None:
            return None
    return None


def programs(fn: Any) -> bool:
    """Whether ``fn`` is the program's own code (not the standard library's, an installed
    package's or streamscope's)."""
    code = _code(fn)
    return code is not None and _program_file(code.co_filename)


def function_name(fn: Any) -> str:
    """A stage name for a callable: its qualified name without ``<locals>``; a lambda's with its
    line (``<lambda>:12``); a partial's function's; a callable object's class's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        name = type(fn).__qualname__
    name = name.replace("<locals>.", "")
    if name.endswith("<lambda>"):
        code = _code(fn)
        if code is not None:
            name = f"{name}:{code.co_firstlineno}"
    return name


def _ident(fn: Any) -> str:
    code = _code(fn)
    if code is not None:
        return f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}"
    kind = fn if isinstance(fn, type) else type(fn)
    return f"{kind.__module__}:{function_name(fn)}"


def _library_object(obj: Any) -> bool:
    """An object worth looking into: an instance of a library's class (not a builtin's, not a
    container, not a type or module)."""
    kind = type(obj)
    return kind.__module__ not in ("builtins", "types", "_thread", "threading") and not (
        isinstance(obj, type | types.ModuleType | str | bytes | int | float | list | dict | set)
    )


def _inside(value: Any) -> Iterator[tuple[str, Any]]:
    """What a value carries that may be (or lead to) the program's function: a library
    function's closure, a bound method's object, a partial's function and arguments, a tuple's
    or list's first items (joblib's batch of calls), a library object's attributes (in their
    order)."""
    if isinstance(value, functools.partial):
        yield "func", value.func
        yield from (("", a) for a in value.args)
        yield from value.keywords.items()
    elif isinstance(value, types.MethodType):
        yield "__func__", value.__func__
        yield "__self__", value.__self__
    elif isinstance(value, types.FunctionType):
        for cell in value.__closure__ or ():
            with contextlib.suppress(ValueError):
                yield "", cell.cell_contents
    elif isinstance(value, tuple | list):
        yield from (("", a) for a in value[:_ITEMS])
    elif _library_object(value):
        d = getattr(value, "__dict__", None)
        if isinstance(d, dict):
            yield from list(d.items())
        for cls in type(value).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                    with contextlib.suppress(AttributeError):
                        yield slot, getattr(value, slot)


def _candidate(value: Any) -> bool:
    return callable(value) and not isinstance(value, type) and programs(value)


def found_function(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The program's own function a worker started with ``target(*args, **kwargs)`` runs: a
    program callable among the arguments; else the target when it is the program's own; else,
    for a library's target, one that the target carries (its closure, its object's attributes,
    the arguments it was bound with: depth first, in their order, hooks such as ``on_start``
    left out); None when nothing of the program's is found."""
    for a in (*args, *kwargs.values()):
        if _candidate(a):
            return a
    if programs(target):
        return target
    looked = itertools.count()
    seen: set[int] = set()

    def search(obj: Any, depth: int) -> Any:
        if id(obj) in seen or next(looked) > _LOOKS:
            return None
        seen.add(id(obj))
        for name, value in _inside(obj):
            if name.startswith("on_") or value is None:
                continue
            if _candidate(value):
                return value
            if depth < _DEPTH:
                hit = search(value, depth + 1)
                if hit is not None:
                    return hit
        return None

    for root in (*(() if _helper(target) else (target,)), *args, *kwargs.values()):
        hit = search(root, 1)
        if hit is not None:
            return hit
    return None


def _helper(target: Any) -> bool:
    """A library object's own method run as a worker (a pool's result handler thread): what
    the object carries is not what the worker does."""
    return isinstance(target, types.MethodType) and not programs(target)


def library_name(target: Any) -> str:
    """A name for a library's worker that runs nothing of the program's: its target's, or,
    for a worker object that calls another library object (pypeln's ``Worker`` and its
    ``FromIterable``), that object's class's."""
    if _library_object(target) and not isinstance(target, types.MethodType):
        for name, value in _inside(target):
            if (
                not name.startswith("_")
                and callable(value)
                and _library_object(value)
                and not isinstance(value, types.MethodType | functools.partial)
            ):
                return type(value).__qualname__
    return function_name(target)


def given_name(name: str | None, default: bool) -> str | None:
    """The stage name a worker's own name gives (None: it has no name, or a default one),
    without a trailing worker number."""
    if not name or default:
        return None
    m = _NUMBERED.fullmatch(name)
    return m.group(1) if m else name


def queue_id(obj: Any) -> str | None:
    """The session id of a recorded queue (a thread, asyncio or ``multiprocessing`` one; None
    for anything else)."""
    if type(obj) in _PLAIN:
        return None
    with contextlib.suppress(Exception):
        qid = getattr(getattr(obj, "_ss", None), "id", None)
        if isinstance(qid, str):
            return qid
        for attr in ("_sem", "_rlock"):
            qid = getattr(getattr(getattr(obj, attr, None), "counts", None), "id", None)
            if isinstance(qid, str):
                return qid
    return None


def _slots(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The queues a worker was handed: among its arguments (their place) and what its target
    carries (a library worker object's attributes, a closure: their path), each with its id."""
    found: list[tuple[str, str]] = []
    looked = itertools.count()
    seen: set[int] = set()

    def search(path: str, value: Any, depth: int) -> None:
        if id(value) in seen or next(looked) > _QUEUE_LOOKS:
            return
        seen.add(id(value))
        q = queue_id(value)
        if q is not None:
            found.append((path, q))
        elif depth < _QUEUE_DEPTH:
            for i, (name, inner) in enumerate(_inside(value)):
                if type(inner) not in _PLAIN:
                    search(f"{path}.{name or i}", inner, depth + 1)

    for place, value in [*((str(i), a) for i, a in enumerate(args)), *kwargs.items()]:
        if type(value) not in _PLAIN:
            search(f"arg {place}", value, _QUEUE_DEPTH - 1)
    if (not isinstance(target, types.FunctionType) or target.__closure__) and not _helper(target):
        search("target", target, 1)
    return tuple(found)


def who_started(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str | None, default: bool
) -> Who:
    """A worker started with ``target(*args, **kwargs)``, named ``name`` (``default``: one the
    library made up)."""
    slots = _slots(target, args, kwargs)
    given = given_name(name, default)
    if given is not None:
        return Who(given, GIVEN, f"given:{given}", slots)
    fn = found_function(target, args, kwargs)
    if fn is not None:
        return Who(function_name(fn), FUNCTION, _ident(fn), slots, own=fn is target)
    return Who(library_name(target), TARGET, _ident(target), slots)


def _subclassed(worker: Any, target: Any, name: str, default: bool) -> Who | None:
    """A ``Thread`` or ``Process`` subclass with its own ``run`` (``target`` is that ``run``):
    the program's class by its given name, else its class's; a library's class (mpire's
    workers) by the program's function it carries (its name is the library's)."""
    run = getattr(target, "func", target)  # a process's run is bound by a partial
    owner = getattr(run, "__self__", None) or next(iter(getattr(target, "args", ())), None)
    if owner is not worker or getattr(run, "__name__", "") != "run":
        return None
    slots = _slots(worker, (), {})
    kind = type(worker)
    if programs(run):
        given = given_name(name, default)
        if given is not None:
            return Who(given, GIVEN, f"given:{given}", slots)
        return Who(function_name(kind), FUNCTION, _ident(run), slots)
    fn = found_function(None, (worker,), {})
    if fn is not None:
        return Who(function_name(fn), FUNCTION, _ident(fn), slots)
    return Who(function_name(kind), TARGET, _ident(run), slots)


def who_of_thread(t: threading.Thread) -> Who:
    """A thread the program started: by its name, its target and arguments, or its class (a
    ``Thread`` subclass with its own ``run``)."""
    target = getattr(t, "_target", None) or t.run
    default = bool(_DEFAULT_THREAD.fullmatch(t.name))
    sub = _subclassed(t, target, t.name, default)
    if sub is not None:
        return sub
    args = tuple(getattr(t, "_args", ()))
    kwargs = dict(getattr(t, "_kwargs", {}))
    return who_started(target, args, kwargs, t.name, default)


def who_of_process(p: Any, target: Any) -> Who:
    """A process the program started, running ``target`` (its ``run`` for a subclass)."""
    default = p.name == f"{type(p).__name__}-" + ":".join(str(i) for i in p._identity)
    sub = _subclassed(p, target, p.name, default)
    if sub is not None:
        return sub
    args = tuple(getattr(p, "_args", ()))
    kwargs = dict(getattr(p, "_kwargs", {}))
    return who_started(target, args, kwargs, p.name, default)


def who_of_task(name: str, code: types.CodeType, arguments: tuple[Any, ...] = ()) -> Who:
    """An asyncio task named ``name`` running a coroutine of ``code`` called with
    ``arguments``: by its name, its coroutine function when it is the program's, else the
    program's function among what the arguments carry (pypeln's tasks), else the coroutine's
    object's class or the coroutine function."""
    given = given_name(name, bool(_DEFAULT_TASK.fullmatch(name)))
    if given is not None:
        return Who(given, GIVEN, f"given:{given}")
    ident = f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}"
    qualname = code.co_qualname.replace("<locals>.", "")
    if _program_file(code.co_filename):
        return Who(qualname, FUNCTION, ident)
    fn = found_function(None, arguments, {})
    if fn is not None:
        return Who(function_name(fn), FUNCTION, _ident(fn))
    owner = arguments[0] if arguments else None
    if owner is not None and _library_object(owner):
        return Who(library_name(owner), TARGET, ident)
    return Who(qualname, TARGET, ident)


__all__ = [
    "FUNCTION",
    "GIVEN",
    "MAIN_WHO",
    "PLACE",
    "TARGET",
    "Who",
    "found_function",
    "function_name",
    "given_name",
    "programs",
    "queue_id",
    "read_interpreter",
    "refined",
    "who_of_process",
    "who_of_task",
    "who_of_thread",
    "who_started",
]
