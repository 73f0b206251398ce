"""streamscope's version, in the one place it is written: the package, its metadata (setup reads
it from here) and every run file it writes take it from this module."""

from __future__ import annotations

VERSION = "0.1.0"
