"""The wrappers function tracing generates, one per traced function.

In: a function, its id and the tracer's per-thread binding. Out: a wrapper with the function's
own signature that records an ENTER and an EXIT per call into the calling thread's bound ring
(a generator's or coroutine's: per resumption, ``Timed``), and the switch that turns it on and
off.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, cast

from streamscope.core import forksafe, native

if TYPE_CHECKING:
    from streamscope.probes.tracing import TraceTap

_PREFIX = "_ss_"  # every name of the generated code; a parameter spelled so gets the generic form

# The wrappers, generated per signature. The ring keeps an ENTER only with room for it, its EXIT
# and the EXIT of every call open now, so the EXIT of a kept ENTER is always kept and the stream
# stays nested; a refused ENTER is counted with its EXIT, and the call runs untraced.
_SOURCE = """\
def _ss_make(_ss_fn, _ss_fid, _ss_loc, _ss_timed):
    _ss_on = False
    _ss_gate = [False]
{body}
    def _ss_switch(_ss_value):
        nonlocal _ss_on
        _ss_on = _ss_gate[0] = _ss_value

    return _ss_wrapper, _ss_switch
"""

_CALL = """
    def _ss_wrapper({params}):
        if _ss_on:
            _ss_r = _ss_loc.ring
            if _ss_r is not None and _ss_r.enter(_ss_fid):
                try:
                    return _ss_fn({args})
                finally:
                    _ss_r.exit(_ss_fid)
        return _ss_fn({args})
"""

# Generators and coroutines: the wrapper binds its arguments when called, as the original does;
# ``_Timed`` then times each resumption of the original's generator or coroutine.
_GENERATOR = """
    def _ss_wrapper({params}):
        return (yield from _ss_timed(_ss_fn({args}), _ss_fid, _ss_gate, _ss_loc))
"""

_COROUTINE = """
    async def _ss_wrapper({params}):
        return await _ss_timed(_ss_fn({args}), _ss_fid, _ss_gate, _ss_loc)
"""

_Maker = Callable[..., tuple[Callable[..., Any], Callable[[bool], None]]]
#: Compiled wrapper makers by (kind, signature, name), shared by the process's tracers:
#: compiling one costs far more than calling it (process-wide cache, and its lock).
_makers: dict[tuple[str, str, str], _Maker] = {}
_makers_lock = forksafe.lock()


def _signature(code: CodeType) -> tuple[str, str]:
    """(parameters, call arguments) that pass every argument on exactly as received."""
    names = code.co_varnames
    npos, nposonly, nkw = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    params = list(names[:npos])
    args = list(params)
    if nposonly:
        params.insert(nposonly, "/")
    i = npos + nkw
    kwonly = names[npos:i]
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[i])
        args.append("*" + names[i])
        i += 1
    elif kwonly:
        params.append("*")
    params.extend(kwonly)
    args.extend(f"{k}={k}" for k in kwonly)
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[i])
        args.append("**" + names[i])
    return ", ".join(params), ", ".join(args)


def _maker(fn: Callable[..., Any], body: str) -> _Maker:
    code = getattr(fn, "__code__", None)
    if isinstance(fn, FunctionType) and isinstance(code, CodeType):
        n = code.co_argcount + code.co_kwonlyargcount
        n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
        exact = not any(v.startswith(_PREFIX) for v in code.co_varnames[:n])
    else:
        exact = False
    params, args = _signature(code) if exact and code is not None else ("*_ss_a, **_ss_k",) * 2
    key = (body, params, args)
    with _makers_lock:
        make = _makers.get(key)
        if make is None:
            namespace: dict[str, Any] = {}
            src = _SOURCE.format(body=body.format(params=params, args=args))
            # Generated code, as dataclasses does: a wrapper with the traced function's own
            # signature calls it with one CALL (inlined by 3.11), measured ~100 ns cheaper per
            # call than *args/**kwargs forwarding. Only parameter names from a code object go in.
            exec(compile(src, "<streamscope.tracing>", "exec"), namespace)  # noqa: S102
            make = _makers[key] = cast(_Maker, namespace["_ss_make"])
    return make


class ThreadBinding(threading.local):
    """The calling thread's binding; class attributes are what unbound threads see."""

    ring: native.Ring | None = None
    tap: TraceTap | None = None


class Timed:
    """Drives a generator or coroutine, timing each resumption as one call (ENTER before it
    runs, EXIT when it yields, returns or raises), so the records stay well nested even though
    the generator lives across other calls. ``yield from`` / ``await`` do the delegation."""

    __slots__ = ("_fid", "_gate", "_inner", "_loc")

    def __init__(self, inner: Any, fid: int, gate: list[bool], loc: ThreadBinding) -> None:
        self._inner, self._fid, self._gate, self._loc = inner, fid, gate, loc

    def __iter__(self) -> Timed:
        return self

    def __await__(self) -> Timed:
        return self

    def _step(self, op: Callable[..., Any], *args: Any) -> Any:
        if self._gate[0]:
            ring = self._loc.ring
            fid = self._fid
            if ring is not None and ring.enter(fid):
                try:
                    return op(*args)
                finally:
                    ring.exit(fid)
        return op(*args)

    def __next__(self) -> Any:
        return self._step(self._inner.send, None)

    def send(self, value: Any) -> Any:
        return self._step(self._inner.send, value)

    def throw(self, *exc: Any) -> Any:
        return self._step(self._inner.throw, *exc)

    def close(self) -> None:
        self._step(self._inner.close)


def make_wrapper(
    fn: Callable[..., Any], fid: int, qualname: str, loc: ThreadBinding
) -> tuple[Callable[..., Any], Callable[[bool], None]]:
    """``fn``'s wrapper (recording as function ``fid`` into ``loc``'s ring, named and
    documented as ``fn``, with its defaults), and its switch (off until switched on)."""
    if inspect.iscoroutinefunction(fn):
        body = _COROUTINE
    elif inspect.isgeneratorfunction(fn):
        body = _GENERATOR
    else:
        body = _CALL
    wrapper, switch = _maker(fn, body)(fn, fid, loc, Timed)
    name_of = getattr(fn, "__name__", "wrapper")
    wrapper.__code__ = wrapper.__code__.replace(co_name=name_of, co_qualname=qualname)
    if isinstance(fn, FunctionType):
        wrapper.__defaults__ = fn.__defaults__
        wrapper.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(wrapper, fn)
    return wrapper, switch


__all__ = ["ThreadBinding", "Timed", "make_wrapper"]
