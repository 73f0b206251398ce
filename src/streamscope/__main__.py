"""``python -m streamscope``: the same as the ``streamscope`` command."""

from __future__ import annotations

from streamscope.cli import entry

entry()
