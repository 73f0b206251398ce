"""Figures made ready for ``json.dumps``: what findings and comparisons put in their dicts.

In: numbers (numpy scalars included), text, and dicts and lists of them. Out: the same with
numpy scalars as Python numbers and ``NaN``/infinities as ``None``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def plain(x: Any) -> Any:
    """``x`` with numpy scalars made Python numbers and non-finite floats ``None``, recursively
    through dicts (keys become text) and lists or tuples (which become lists)."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
