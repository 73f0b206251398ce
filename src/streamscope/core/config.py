"""Settings read from the environment, each one documented constant, read here and nowhere else.

In: ``os.environ`` once, when this module is imported. Out: plain constants.
"""

from __future__ import annotations

import os
from pathlib import Path

#: ``STREAMSCOPE_PURE_PYTHON=1``: use the pure-Python probe core even where the native one was
#: built (to compare them, or to rule the extension out). Read at import, in every process.
PURE_PYTHON: bool = os.environ.get("STREAMSCOPE_PURE_PYTHON", "").strip().lower() not in (
    "",
    "0",
    "false",
    "no",
)

#: ``STREAMSCOPE_CACHE``: where streamscope keeps what it builds once and reuses (the Verilator
#: libraries of RTL devices' cores, an empty run file of each schema); ``~/.cache/streamscope``
#: when unset.
CACHE_DIR: Path = Path(
    os.environ.get("STREAMSCOPE_CACHE") or Path.home() / ".cache" / "streamscope"
)
