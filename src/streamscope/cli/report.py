"""``streamscope report``: being built (see the analysis, report and export layers)."""

from __future__ import annotations

from streamscope.core.errors import ConfigError


def report() -> int:
    """Not available yet."""
    raise ConfigError("streamscope report is not available in this build")
