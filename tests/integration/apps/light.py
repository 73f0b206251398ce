"""``two_stages.py``'s plain threaded pipeline, then which of the heavy libraries this process
has loaded (the program uses none of them): what monitoring loaded into it.

    python light.py
"""

import sys

import two_stages  # noqa: F401 - runs the pipeline

HEAVY = (
    "numpy",
    "duckdb",
    "rich",
    "typer",
    "scipy",
    "lark",
    "pydantic",
    "plotly",
    "asyncio",
    "ssl",
    "streamscope.query",  # a program reads no query
)

print(sorted(m for m in HEAVY if m in sys.modules))
