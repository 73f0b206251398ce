"""A probe declared on a stage (``Pipeline.probe``), its declaration checked.

In: the stage, name, kind and options a program gives, the stages and the probes declared so
far. Out: the probe's ``UserProbeInfo``, or a ``PipelineError`` that says what was wrong and
what would be valid.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from streamscope.core.errors import PipelineError
from streamscope.core.topology import DECLARABLE_KINDS, UserProbeInfo
from streamscope.pipeline.describe.specs import STORAGE_SCHEMES
from streamscope.probes.hardware import parse_condition


def declare_probe(
    stage: str,
    name: str,
    kind: str,
    *,
    storage: str,
    trigger: Sequence[str],
    reset_on_mismatch: bool,
    period_us: float | None,
    members: Sequence[str],
    stages: Collection[str],
    declared: Mapping[str, UserProbeInfo],
) -> UserProbeInfo:
    """The probe ``STAGE.NAME`` as ``Pipeline.probe`` documents it; ``stages``: the pipeline's
    stages, ``declared``: its probes so far, by full name."""
    _check_place(stage, name, stages)
    full = f"{stage}.{name}"
    if kind not in DECLARABLE_KINDS:
        raise PipelineError(
            f"probe {full}: kind must be one of {', '.join(DECLARABLE_KINDS)}, not {kind!r}"
        )
    scheme = _storage_scheme(full, kind, storage)
    _check_trigger(full, kind, trigger)
    period_ns = _period_ns(full, kind, period_us)
    _check_members(full, stage, kind, members, declared)
    if full in declared:
        raise PipelineError(f"probe {full!r} is declared twice")
    return UserProbeInfo(
        full, stage, kind, scheme, tuple(trigger), reset_on_mismatch, period_ns, tuple(members)
    )


def _check_place(stage: str, name: str, stages: Collection[str]) -> None:
    if stage not in stages:
        known = ", ".join(stages) or "(none)"
        raise PipelineError(
            f"cannot add probe {name!r}: unknown stage {stage!r}; known stages: {known}"
        )
    if not name or not all(ch.isalnum() or ch in "_-" for ch in name):
        raise PipelineError(
            f"bad probe name {name!r} on stage {stage!r}: use letters, digits, '_' or '-'"
        )


def _storage_scheme(full: str, kind: str, storage: str) -> str:
    """``storage`` spelled the one way (``central``, ``centralised``: ``centralized``)."""
    scheme = {"central": "centralized", "centralised": "centralized"}.get(storage, storage)
    if scheme not in STORAGE_SCHEMES:
        raise PipelineError(
            f"probe {full}: storage must be one of {', '.join(STORAGE_SCHEMES)}, not {storage!r}"
        )
    if kind != "sampler" and scheme != "distributed":
        raise PipelineError(f"probe {full}: only samplers can use centralized storage")
    return scheme


def _check_trigger(full: str, kind: str, trigger: Sequence[str]) -> None:
    if trigger and kind not in ("sampler", "counter"):
        raise PipelineError(f"probe {full}: only samplers and counters take a trigger")
    for cond in trigger:
        try:
            parse_condition(cond, f"probe {full}")
        except ValueError as e:
            raise PipelineError(str(e)) from None


def _period_ns(full: str, kind: str, period_us: float | None) -> int:
    """A sampler's period in ns (0: none)."""
    if period_us is None:
        return 0
    if kind != "sampler":
        raise PipelineError(f"probe {full}: only samplers take a period")
    period_ns = round(period_us * 1e3)
    if period_ns <= 0:
        raise PipelineError(f"probe {full}: the period must be positive, not {period_us}")
    return period_ns


def _check_members(
    full: str, stage: str, kind: str, members: Sequence[str], declared: Mapping[str, UserProbeInfo]
) -> None:
    """A global trigger's members are samplers declared on its stage before it."""
    if kind != "global":
        if members:
            raise PipelineError(f"probe {full}: only a global trigger has members")
        return
    if not members:
        raise PipelineError(f"probe {full}: a global trigger needs members")
    for m in members:
        other = declared.get(f"{stage}.{m}")
        if other is None or other.kind != "sampler":
            raise PipelineError(
                f"probe {full}: member {m!r} is not a sampler declared on {stage!r}"
            )


__all__ = ["declare_probe"]
