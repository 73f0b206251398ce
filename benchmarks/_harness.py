"""Shared benchmark plumbing: interleaved repetitions, robust summaries and a plain-text table.

In: named zero-argument measurements (each returns one figure per metric). Out: samples taken
A, B, A, B, ... (order reversed every other round), medians, spreads and paired ratios.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: One repetition of one variant; returns one figure per metric (e.g. wall and CPU time).
Measure = Callable[[], tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class Summary:
    """Samples of one variant, in the order they were taken."""

    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def spread(self) -> float:
        """(max - min) / median, as a fraction: how far apart the repetitions landed."""
        m = self.median
        return (max(self.samples) - min(self.samples)) / m if m else 0.0


def parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark takes; a benchmark may add its own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="a smaller run (smoke check, under ~20 s)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per variant")
    return ap


def parse_args(description: str) -> argparse.Namespace:
    return parser(description).parse_args()


def interleave(
    variants: Sequence[tuple[str, Measure]], reps: int, metrics: int = 1
) -> list[list[Summary]]:
    """Run every variant once per round, ``reps`` rounds, alternating the order of each round so
    that slow drift on a noisy machine (frequency, neighbours) falls on every variant alike.
    The collector is paused while a measurement runs and a full collection precedes each one.

    Returns one list of summaries (one per variant, in the given order) per metric.
    """
    samples: dict[str, list[tuple[float, ...]]] = {name: [] for name, _ in variants}
    for rnd in range(reps):
        order = variants if rnd % 2 == 0 else list(reversed(variants))
        for name, measure in order:
            gc.collect()
            gc.disable()
            try:
                figures = measure()
            finally:
                gc.enable()
            if len(figures) != metrics:
                raise RuntimeError(f"{name}: {len(figures)} figures, expected {metrics}")
            samples[name].append(figures)
    return [
        [Summary(name, tuple(s[m] for s in samples[name])) for name, _ in variants]
        for m in range(metrics)
    ]


def paired_ratios(num: Summary, den: Summary) -> Summary:
    """Per-round ratios num/den: rounds are adjacent in time, so their ratio cancels drift."""
    return Summary(
        f"{num.name} / {den.name}",
        tuple(a / b for a, b in zip(num.samples, den.samples, strict=True)),
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned figures."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def machine() -> str:
    """One line about where the figures come from (they mean little elsewhere)."""
    return (
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} logical CPUs; figures are medians of interleaved repetitions"
    )


def fmt_spread(s: Summary) -> str:
    return f"±{100 * s.spread / 2:.0f}%"


def callgrind_instructions(
    valgrind: str, options: Sequence[str], argv: Sequence[str]
) -> int | None:
    """Instructions ``valgrind --tool=callgrind OPTIONS python ARGV`` collected (hash seed
    fixed, so runs repeat); None, with what valgrind said, when it failed."""
    proc = subprocess.run(
        [valgrind, "--tool=callgrind", *options, sys.executable, *argv],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        print(f"callgrind failed: {proc.stderr[-800:]}")
        return None
    return int(found.group(1))
