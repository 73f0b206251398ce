"""The one ``with`` shape of things that hold a file or a connection open: entering gives the
thing itself, leaving closes it, whatever happened in the block."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Closing(ABC):
    """``with thing:`` closes ``thing`` at the end of the block."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Let go of what is held (idempotent)."""
