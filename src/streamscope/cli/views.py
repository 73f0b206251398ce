"""What ``streamscope run`` shows while a run goes on: the terminal's live view of the frames
as they close (unless ``--quiet``), with ``--serve`` the live page on loopback and with
``--metrics`` its figures for Prometheus.

In: a way to start the run with its frame callbacks, the run's plan (for the frames' labels),
a console, and the live page and metrics if asked for. Out: the run's result; the page and the
metrics, told the run ended, stop a moment later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from streamscope.aggregate.points import DropCount, FrameResult
    from streamscope.core.topology import Topology
    from streamscope.query.plan import Plan
    from streamscope.report.live import LivePage
    from streamscope.report.metrics import MetricsServer
    from streamscope.report.plain import PlainConsole
    from streamscope.runtime.options import FramesCallback, LagCallback, RunOptions, RunResult
    from streamscope.store.writer import QueryRecord

#: How long the live page stays up after the run, for open pages to get its end (s).
LINGER_S = 1.5


def watch(
    start: Callable[..., RunResult],
    plan: Plan,
    console: Console | PlainConsole,
    page: LivePage | None,
    *,
    quiet: bool,
    out: Path,
    metrics: MetricsServer | None = None,
) -> RunResult:
    """Run by ``start(on_frames=..., on_lag=..., on_note=...)``, its frames shown on
    ``console`` (not when ``quiet``: then only ``on_frames``, for the page and the metrics),
    on ``page`` and in ``metrics``; both are ended (the page from the run file ``out``)
    however the run ends."""
    from streamscope.report.terminal import LiveView

    view = LiveView(plan, console)
    counted = metrics.metrics if metrics is not None else None
    sinks = [
        f
        for f in (
            None if quiet else view.on_frames,
            page and page.on_frames,
            counted and counted.on_frames,
        )
        if f
    ]
    on_frames = _both(*sinks) if sinks else None
    try:
        if quiet:
            if counted is not None:
                return start(on_frames=on_frames, on_lag=counted.on_lag)
            return start(on_frames=on_frames)
        with view:
            on_lag = view.on_lag if counted is None else _lags(view.on_lag, counted.on_lag)
            return start(on_frames=on_frames, on_lag=on_lag, on_note=view.on_note)
    finally:
        if counted is not None:
            counted.finish()  # its figures are final: the page's linger serves them too
        if page is not None:
            _end_page(page, out)
        if metrics is not None:
            _end_metrics(metrics)


def open_page(
    name: str,
    plan: Plan,
    topology: Topology,
    opts: RunOptions,
    port: int,
    grown: Callable[[], tuple[Topology, list[QueryRecord]]] | None = None,
) -> LivePage:
    """``--serve``: the live page, listening before the run starts (its address printed).
    ``grown``: for a run whose stages and channels appear as it goes, what it has now."""
    from streamscope.cli.common import err_console
    from streamscope.monitor.service import query_records
    from streamscope.report.live import LivePage
    from streamscope.runtime.options import make_meta

    page = LivePage(
        make_meta(name, opts), topology, query_records(plan, topology), port, grown, opts.keep_ns
    )
    try:
        url = page.start()
    except OSError as exc:
        from streamscope.core.errors import ConfigError

        raise ConfigError(f"--serve: {exc}") from None
    err_console().print(f"live page: {url}", markup=False, highlight=False)
    return page


def open_metrics(name: str, plan: Plan, host: str, port: int) -> MetricsServer:
    """``--metrics``: the run's figures for Prometheus, served before the run starts (their
    address printed)."""
    from streamscope.cli.common import err_console
    from streamscope.core.errors import ConfigError
    from streamscope.report.metrics import MetricsServer, RunMetrics

    served = MetricsServer(RunMetrics(name, {q.id: q.metric for q in plan.queries}), host, port)
    try:
        url = served.start()
    except OSError as exc:
        raise ConfigError(f"--metrics: cannot listen on {host}:{port}: {exc}") from None
    err_console().print(f"metrics: {url}", markup=False, highlight=False)
    return served


def _end_page(page: LivePage, out: Path) -> None:
    """The run ended: the live page says how (from its run file), serves its last report a
    moment longer for open pages to get it, then stops."""
    from streamscope.store.reader import load

    status, duration = "interrupted", 0
    error: str | None = "the run file could not be read"
    with contextlib.suppress(Exception), load(out) as done:
        status, error, duration = done.status, done.error, int(done.duration_ns or 0)
    page.finish(status if status != "running" else "interrupted", error, duration)
    page.stop(linger_s=LINGER_S)


def _end_metrics(metrics: MetricsServer) -> None:
    """The run ended: its final figures are served until a scrape took them (a scraper seen
    during the run is waited for once more, saying so), then the metrics stop."""
    wait_s = metrics.metrics.linger_s(LINGER_S)
    if wait_s > 2 * LINGER_S:
        from streamscope.cli.common import err_console

        err_console().print(
            f"metrics: serving the run's final figures until the next scrape (at most "
            f"{wait_s:.0f} s)",
            markup=False,
            highlight=False,
        )
    metrics.stop(linger_s=LINGER_S)


def _lags(*sinks: LagCallback) -> LagCallback:
    """One lag callback that calls each of ``sinks`` in turn."""

    def call(lag_ns: int, cpu_ns: int | None = None) -> None:
        for sink in sinks:
            sink(lag_ns, cpu_ns)

    return call


def _both(*sinks: FramesCallback) -> FramesCallback:
    """One frames callback that calls each of ``sinks`` in turn."""
    if len(sinks) == 1:
        return sinks[0]

    def call(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        for sink in sinks:
            sink(results, drops)

    return call
