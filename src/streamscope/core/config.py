"""Settings read from the environment, each one documented constant, read here and nowhere else.

In: ``os.environ`` once, when this module is imported. Out: plain constants.
"""

from __future__ import annotations

import os

#: ``STREAMSCOPE_PURE_PYTHON=1``: use the pure-Python probe core even where the native one was
#: built (to compare them, or to rule the extension out). Read at import, in every process.
PURE_PYTHON: bool = os.environ.get("STREAMSCOPE_PURE_PYTHON", "").strip().lower() not in (
    "",
    "0",
    "false",
    "no",
)
