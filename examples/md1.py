"""M/D/1 micro-benchmark (Lancaster et al. 2011): as ``mm1.py`` but every service takes the same time.

streamscope run examples/md1.py -q 'occupancy(source -> server): mean, histogram' -- --rho 0.8
"""

from __future__ import annotations

import streamscope as ss
from mm1 import QUERIES, build

__all__ = ["QUERIES", "pipeline"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv, default_service="const")
