"""The end-of-stream marker and the exception of an aborted channel, shared by every FIFO.

In: nothing. Out: ``EOS`` (never an item: not counted, never recorded) and ``Aborted``.
"""

from __future__ import annotations


class EndOfStream:
    """The marker a finished producer leaves in each of its output channels."""

    _instance: EndOfStream | None = None

    def __new__(cls) -> EndOfStream:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EOS"


EOS = EndOfStream()


class Aborted(Exception):
    """Raised in a stage whose channel was aborted because the run is stopping."""
