"""Errors a user can cause. Each says what was wrong, where, and what would be valid."""

from __future__ import annotations

import os
import traceback


class StreamscopeError(Exception):
    """Base of every error caused by input (queries, pipelines, files, options)."""

    exit_code = 2


class StreamscopeWarning(UserWarning):
    """Something in what was asked deserves a look, though nothing failed (a query of a
    monitored program that matched nothing that ran)."""


class ConfigError(StreamscopeError):
    """A bad option, duration, environment variable or path."""


class QueryError(StreamscopeError):
    """A query that does not parse or names something that does not exist.

    ``line`` and ``column`` are 1-based positions in ``text`` when known.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        line: int | None = None,
        column: int | None = None,
        source: str = "",
    ) -> None:
        self.text = text
        self.line = line
        self.column = column
        self.source = source
        where = ""
        if line is not None and column is not None:
            where = f"{source or 'query'}:{line}:{column}: "
        elif source:
            where = f"{source}: "
        detail = message
        if text and line is not None and column is not None:
            lines = text.splitlines() or [""]
            src_line = lines[line - 1] if 0 < line <= len(lines) else ""
            detail = f"{message}\n  {src_line}\n  {' ' * (column - 1)}^"
        super().__init__(f"{where}{detail}")
        self.message = message


class PipelineError(StreamscopeError):
    """A pipeline that cannot be built or run as described (unknown stage, bad wiring...)."""


class StageError(StreamscopeError):
    """A stage raised while the pipeline ran. The run is recorded as ``failed``."""

    exit_code = 1

    def __init__(self, stage: str, error: str) -> None:
        self.stage = stage
        self.error = error
        super().__init__(f"stage {stage!r} raised {error}")


class MissingExtraError(StreamscopeError, ImportError):
    """A part of streamscope whose requirement a plain install leaves out (hosts need Ray, the
    FPGA probe cores Amaranth): the message names the extra that brings it (``extra``). An
    ``ImportError`` too, as what failed is an import."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class RunFileError(StreamscopeError):
    """A run file that is missing, not a streamscope run, or unreadable."""


class AppError(StreamscopeError):
    """An application file that cannot be loaded, or whose ``pipeline(argv)`` raised."""


def describe_exception(exc: BaseException) -> str:
    """``Type: message (at file:line in function)`` for the innermost frame of the traceback."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = (
        f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    )
    return f"{type(exc).__name__}: {exc}{where}"
