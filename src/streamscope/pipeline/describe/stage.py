"""Stage bodies: plain functions, generators and setup/process/teardown classes, made uniform.

In: what a user passed to ``Pipeline.add``. Out: a ``StageBody`` with ``setup``, ``generate``
(sources), ``process`` (returns an iterable of outputs) and ``teardown``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streamscope.core.errors import PipelineError

_NOTHING: tuple[Any, ...] = ()


class StageBody:
    """The uniform face of one stage's user code."""

    def __init__(self, name: str, obj: Any) -> None:
        self.name = name
        self.obj = obj
        self._setup: Callable[[], Any] | None = (
            getattr(obj, "setup", None) if not _is_plain(obj) else None
        )
        self._teardown: Callable[[], Any] | None = (
            getattr(obj, "teardown", None) if not _is_plain(obj) else None
        )
        if _is_plain(obj):
            self._fn: Callable[..., Any] | None = obj
        else:
            self._fn = getattr(obj, "process", None) or getattr(obj, "generate", None)
        if self._fn is None or not callable(self._fn):
            raise PipelineError(
                f"stage {name!r}: expected a function, a generator function, an iterable (for a "
                f"source) or an object with a process() or generate() method; got {type(obj).__name__}"
            )
        self._is_gen = inspect.isgeneratorfunction(self._fn)

    @property
    def fn(self) -> Callable[..., Any]:
        """The user's function (a source's generator or a stage's per-item function)."""
        assert self._fn is not None
        return self._fn

    def setup(self) -> None:
        if self._setup is not None:
            self._setup()

    def teardown(self) -> None:
        if self._teardown is not None:
            self._teardown()

    def generate(self) -> Iterator[Any]:
        """A source's items: its generator, or what its function returns (an iterable)."""
        assert self._fn is not None
        out = self._fn()
        if out is None:
            return iter(_NOTHING)
        if not isinstance(out, Iterable):
            raise PipelineError(
                f"source {self.name!r} must be a generator or return an iterable, got {type(out).__name__}"
            )
        return iter(out)

    def process(self, item: Any) -> Iterable[Any]:
        """Outputs for one input: a generator's yields, or the return value unless it is None."""
        assert self._fn is not None
        if self._is_gen:
            return self._fn(item)  # type: ignore[no-any-return]
        out = self._fn(item)
        return _NOTHING if out is None else (out,)


def _is_plain(obj: Any) -> bool:
    return (
        inspect.isfunction(obj)
        or inspect.ismethod(obj)
        or inspect.isbuiltin(obj)
        or (callable(obj) and not hasattr(obj, "process") and not hasattr(obj, "generate"))
    )


def as_source(obj: Any) -> Any:
    """Accept a plain iterable (list, range, array) as a source by wrapping it in a function."""
    if isinstance(obj, Iterable) and not callable(obj) and not hasattr(obj, "generate"):
        items = obj
        return lambda: iter(items)
    return obj
