"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from watched import Watched, starter


@pytest.fixture
def start() -> Iterator[Callable[..., Watched]]:
    """``start(*args)`` launches ``streamscope run`` watched; whatever is left is killed after."""
    yield from starter()
