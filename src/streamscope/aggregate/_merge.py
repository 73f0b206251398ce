"""Merge checks shared by the accumulators: two accumulators in, the other one out (typed as
this one) when they may merge, else a ValueError that says why not.
"""

from __future__ import annotations

from typing import TypeVar

A = TypeVar("A")


def same_kind(acc: A, other: object) -> A:
    """``other``, when it is of exactly ``acc``'s class (min never merges into max)."""
    if type(other) is not type(acc):
        raise ValueError(f"cannot merge {type(other).__name__} into {type(acc).__name__}")
    return other


def check_params(name: str, mine: object, theirs: object) -> None:
    """Accumulators of one class merge only with equal parameters (edges, labels, quantiles)."""
    if mine != theirs:
        raise ValueError(f"cannot merge accumulators with different {name}: {mine} != {theirs}")
