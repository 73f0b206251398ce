"""``streamscope compare``: being built (see the analysis, report and export layers)."""

from __future__ import annotations

from streamscope.core.errors import ConfigError


def compare() -> int:
    """Not available yet."""
    raise ConfigError("streamscope compare is not available in this build")
