"""The Little's law pass: on each channel, does the mean occupancy L equal throughput × latency λ·W?

In: a ``Context`` whose run measured a channel's occupancy, throughput and latency (their
``mean``), and what each channel still held when it or the run ended (``leftover``). Out: one
``littles_law`` ``Finding`` per such channel: ``info`` where the three agree within
``littles_tolerance``, ``warning`` where they do not (so at least one is off). Items a channel
still held at its end count in L (their time in it) and in neither λ (removals) nor W (they
never came out): their time is taken out of L first, and the finding says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streamscope.analysis.context import Context, Finding
from streamscope.analysis.evidence import frame_ranges, rounded
from streamscope.analysis.series import F64, I64, Series, whole_run
from streamscope.core.topology import ChannelInfo

_METRICS = ("occupancy", "throughput", "latency")


@dataclass(frozen=True, slots=True)
class _Law:
    """L (items), λ (items/s) and W (ns) of one channel over the whole run, and their frames."""

    big_l: float
    lam: float
    big_w: float
    frames: I64
    same_grid: bool
    #: The ns over which L is a mean (the frames' covered time, added).
    covered_ns: float


def littles_law(ctx: Context) -> list[Finding]:
    """One finding per channel with all three measurements, in topology order."""
    out = []
    _, rows = ctx.run.sql("SELECT channel, items, ns FROM leftover")
    left = {str(c): (int(n), float(ns)) for c, n, ns in rows}
    for ch in ctx.run.topology.channels:
        law = _measure(ctx.series, ch.name)
        if law is None:
            continue
        found = _finding(ch, law, ctx.littles_tolerance, left.get(ch.name, (0, 0.0)))
        if found is not None:
            out.append(found)
    return out


def _measure(series: Sequence[Series], channel: str) -> _Law | None:
    """L, λ and W of ``channel`` from its first query of each metric with a ``mean``: on the
    frames all three share when they share a frame grid, else each over the whole run."""
    got = {}
    for metric in _METRICS:
        s = next(
            (
                s
                for s in series
                if s.target == channel and s.query.metric == metric and "mean" in s.scalars
            ),
            None,
        )
        if s is not None:
            got[metric] = s
    if len(got) < len(_METRICS):
        return None
    occ, thr, lat = (got[m] for m in _METRICS)
    if occ.query.frame_ns == thr.query.frame_ns == lat.query.frame_ns:
        return _on_shared_frames(occ, thr, lat)
    lv, tv, wv = (whole_run(s.scalars["mean"], s.covered, "mean") for s in (occ, thr, lat))
    if lv is None or tv is None or wv is None:
        return None
    covered = float(occ.covered[~np.isnan(occ.scalars["mean"])].sum())
    return _Law(lv, tv, wv, np.union1d(occ.frames, thr.frames), False, covered)


def _on_shared_frames(occ: Series, thr: Series, lat: Series) -> _Law | None:
    """L and λ weighted by each frame's covered time, W by the items each frame saw."""
    common = np.intersect1d(np.intersect1d(occ.frames, thr.frames), lat.frames)

    def pick(s: Series) -> tuple[F64, F64]:
        idx = np.searchsorted(s.frames, common)
        return s.scalars["mean"][idx], s.covered[idx]

    (l_v, cov), (t_v, _), (w_v, _) = pick(occ), pick(thr), pick(lat)
    ok = ~(np.isnan(l_v) | np.isnan(t_v)) & (cov > 0)
    if not ok.any():
        return None
    c = cov[ok]
    n = t_v[ok] * c
    wok = ~np.isnan(w_v[ok]) & (n > 0)
    if not wok.any():
        return None
    big_l = float(np.dot(l_v[ok], c) / c.sum())
    lam = float(np.dot(t_v[ok], c) / c.sum())
    big_w = float(np.dot(w_v[ok][wok], n[wok]) / n[wok].sum())
    return _Law(big_l, lam, big_w, common[ok], True, float(c.sum()))


def _finding(
    ch: ChannelInfo, law: _Law, tolerance: float, left: tuple[int, float]
) -> Finding | None:
    """The finding for ``ch``: ``None`` when nothing flowed and nothing waited. ``left``: the
    items it held at its end and their ns in it, taken out of L."""
    product = law.lam * law.big_w / 1e9
    held, held_ns = left
    big_l = law.big_l
    if held > 0 and law.covered_ns > 0:
        big_l = max(law.big_l - held_ns / law.covered_ns, 0.0)
    if product <= 0 and big_l <= 0:
        return None
    ratio = big_l / product if product > 0 else math.inf
    evidence = {
        "channel": ch.name,
        "L_items": rounded(big_l),
        "L_with_left_items": rounded(law.big_l),
        "left_items": held,
        "lambda_per_s": rounded(law.lam),
        "W_ns": rounded(law.big_w, 1),
        "lambda_W_items": rounded(product),
        "ratio": rounded(ratio),
        "tolerance": tolerance,
        "same_frames": law.same_grid,
        "frames": frame_ranges(int(f) for f in law.frames),
    }
    kind_of_l = "the model's estimate of " if ch.is_link else ""
    less = (
        f" (less the {held:,} item{'s' if held != 1 else ''} it still held at its end: "
        f"{law.big_l:.3g} with their time in it, which λ and W do not count)"
        if big_l != law.big_l
        else ""
    )
    detail = (
        f"Over the whole run, {kind_of_l}the mean occupancy L = {big_l:.3g} items{less} and "
        f"throughput × mean latency λ·W = {law.lam:.4g}/s × {law.big_w / 1e6:.4g} ms = "
        f"{product:.3g} items (L / λW = {ratio:.3g}, tolerance ±{tolerance * 100:.0f} %)."
    )
    if abs(ratio - 1.0) <= tolerance:
        return Finding(
            "littles_law",
            "info",
            ch.name,
            f"Little's law holds on {ch.name} (L / λW = {ratio:.2f})",
            detail + " The three measurements of this channel agree.",
            evidence,
            "",
        )
    return Finding(
        "littles_law",
        "warning",
        ch.name,
        f"Little's law does not hold on {ch.name} (L / λW = {ratio:.2f})",
        detail + " The measurements of this channel disagree, so at least one is off.",
        evidence,
        "look for dropped probe records, partly covered frames, clock-domain trouble "
        + ("or a rejected queue model " if ch.is_link else "")
        + "on this channel; a run long against its frame narrows edge effects",
    )
