"""``streamscope export``: being built (see the analysis, report and export layers)."""

from __future__ import annotations

from streamscope.core.errors import ConfigError


def export() -> int:
    """Not available yet."""
    raise ConfigError("streamscope export is not available in this build")
