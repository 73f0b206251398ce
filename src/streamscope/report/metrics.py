"""A run's figures for Prometheus while it goes on (``streamscope run --metrics``).

In: every batch of frames as the monitor closes them (``on_frames``), its lag (``on_lag``) and
the run's end. Out: ``/metrics`` on HOST:PORT, Prometheus text or OpenMetrics, read at scrape time.
"""

from __future__ import annotations

import math
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.core.errors import ConfigError
from streamscope.pipeline.program.auto.stages import own_thread

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

#: Where ``--metrics PORT`` listens when it names no host: loopback only.
DEFAULT_HOST = "127.0.0.1"
#: The longest the end of a run waits for a scraper seen during it to scrape once more (s).
MAX_LINGER_S = 60.0
#: A scraper that stops reading its response, or a connection that sends no request, is let
#: go after this long (s).
REQUEST_TIMEOUT_S = 5.0
#: Connections answered at once (a thread each); one more is closed at once, unanswered: idle
#: connections held open (on an address others can reach) cost a bounded number of threads.
MAX_CONNECTIONS = 32

_ADDRESS = re.compile(r"(?:(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+)):)?(?P<port>\d{1,5})")


def metrics_address(text: str) -> tuple[str, int]:
    """``--metrics``'s ``[HOST:]PORT`` as ``(host, port)``: ``127.0.0.1`` when only PORT is
    given, an IPv6 address in brackets (``[::1]:9464``); PORT 0 is any free one."""
    found = _ADDRESS.fullmatch(text.strip())
    port = int(found["port"]) if found else -1
    if found is None or port > 65535:
        raise ConfigError(
            f"bad value for --metrics: {text!r}; valid: PORT or HOST:PORT, PORT a number "
            "0-65535 (0: any free one), HOST a name or an address ([IPv6] in brackets); "
            f"PORT alone listens on {DEFAULT_HOST}, e.g. --metrics 9464 or "
            "--metrics 0.0.0.0:9464"
        )
    return found["v6"] or found["host"] or DEFAULT_HOST, port


@dataclass(slots=True)
class _Latest:
    """A gauge's latest value per label set, from the latest frame that had one."""

    frame: dict[tuple[str, ...], int] = field(default_factory=dict)
    value: dict[tuple[str, ...], float] = field(default_factory=dict)

    def set(self, labels: tuple[str, ...], frame: int, value: float | None) -> None:
        if value is None or math.isnan(value) or frame < self.frame.get(labels, -1):
            return
        self.frame[labels] = frame
        self.value[labels] = value


class RunMetrics:
    """A prometheus_client collector of one run: fed its frames as they close, it answers each
    scrape with what it has then. Counters add up every final frame from the run's start, as
    ``streamscope show`` adds them up over the run file: a channel's items are its
    ``throughput`` mean times each frame's covered time, a stage's seconds in a state its
    ``state`` duty times that. Where the run has several queries of one metric on a target,
    the first one counts."""

    def __init__(self, run: str, metrics: Mapping[int, str]) -> None:
        #: The ``run`` label: the run's name.
        self.run = run
        self._metric_of = dict(metrics)  # query id -> metric (occupancy, throughput, ...)
        self._lock = threading.Condition()
        self._owner: dict[tuple[str, str], int] = {}  # (metric, target) -> the query counted
        self._items: dict[str, float] = {}  # channel -> items removed at its head
        self._state_s: dict[tuple[str, str], float] = {}  # (stage, state) -> seconds
        self._occupancy = _Latest()
        self._occupancy_max = _Latest()
        self._latency_mean = _Latest()
        self._latency = _Latest()  # (channel, quantile)
        self._records = 0
        self._dropped = 0
        self._lag_ns = 0
        self._cpu_ns: int | None = None
        self.running = True
        self._ended_at = 0.0  # monotonic
        #: Scrapes answered (monotonic times, the latest two) and those answered after the end.
        self._scrapes: list[float] = []
        self._after_end = 0

    # --- fed by the run ---------------------------------------------------------------------

    def on_frames(self, results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        """A batch of closed frames (provisional ones wait for their final frame)."""
        with self._lock:
            for r in sorted((r for r in results if not r.provisional), key=lambda r: r.query_id):
                metric = self._metric_of.get(r.query_id)
                if metric is None:
                    continue
                if self._owner.setdefault((metric, r.target), r.query_id) == r.query_id:
                    self._add(metric, r)
            for d in drops:
                self._records += max(d.recorded, 0)
                self._dropped += max(d.dropped, 0)

    def on_lag(self, lag_ns: int, cpu_ns: int | None = None) -> None:
        """How far the monitor is behind the program (ns), and its process's CPU time so far
        (ns; None: not known, a monitor in the program's process)."""
        with self._lock:
            self._lag_ns = lag_ns
            if cpu_ns is not None:
                self._cpu_ns = max(self._cpu_ns or 0, cpu_ns)

    def finish(self) -> None:
        """The run ended: every frame is in, the figures are final."""
        with self._lock:
            if self.running:
                self.running, self._ended_at = False, time.monotonic()
            self._lock.notify_all()

    def _add(self, metric: str, r: FrameResult) -> None:
        channel = (r.target,)
        for p in r.points:
            if metric == "throughput" and isinstance(p, ScalarPoint) and p.stat == "mean":
                if p.value is not None and p.value > 0:  # NaN > 0 is False
                    items = round(p.value * r.covered_ns / 1e9)  # a count: whole items
                    self._items[r.target] = self._items.get(r.target, 0.0) + items
                else:
                    self._items.setdefault(r.target, 0.0)
            elif metric == "occupancy" and isinstance(p, ScalarPoint):
                if p.stat == "mean":
                    self._occupancy.set(channel, r.frame, p.value)
                elif p.stat == "max":
                    self._occupancy_max.set(channel, r.frame, p.value)
            elif metric == "latency" and isinstance(p, ScalarPoint) and p.stat == "mean":
                self._latency_mean.set(channel, r.frame, _seconds(p.value))
            elif metric == "latency" and isinstance(p, QuantilesPoint):
                for q, v in zip(p.qs, p.values, strict=True):
                    self._latency.set((r.target, f"{q:g}"), r.frame, _seconds(v))
            elif metric == "state" and isinstance(p, DutyPoint) and sum(p.fractions) > 0:
                for label, frac in zip(p.labels, p.fractions, strict=True):
                    key = (r.target, label)
                    self._state_s[key] = self._state_s.get(key, 0.0) + frac * r.covered_ns / 1e9

    # --- read at scrape time ----------------------------------------------------------------

    def describe(self) -> list[Metric]:
        """Nothing to check ahead: the metrics' names are fixed, their label values grow."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The metric families as they are now (prometheus_client calls it at each scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            now = time.monotonic()
            self._scrapes = [*self._scrapes[-1:], now]
            if not self.running:
                self._after_end += 1
                self._lock.notify_all()
            items, state_s = dict(self._items), dict(self._state_s)
            gauges = {
                "occupancy": dict(self._occupancy.value),
                "occupancy_max": dict(self._occupancy_max.value),
                "latency_mean": dict(self._latency_mean.value),
                "latency": dict(self._latency.value),
            }
            records, dropped, lag_ns, cpu_ns, running = (
                self._records, self._dropped, self._lag_ns, self._cpu_ns, self.running,
            )  # fmt: skip
        run = self.run
        counter = CounterMetricFamily(
            "streamscope_channel_items_total",
            "Items removed at the channel's head since the run started.",
            labels=("run", "channel"),
            unit="items",
        )
        for channel, n in sorted(items.items()):
            counter.add_metric((run, channel), n)
        yield counter
        counter = CounterMetricFamily(
            "streamscope_stage_state_seconds_total",
            "Seconds the stage spent in each state (busy, idle, blocked_in, blocked_out) since "
            "the run started.",
            labels=("run", "stage", "state"),
            unit="seconds",
        )
        for (stage, state), s in sorted(state_s.items()):
            counter.add_metric((run, stage, state), s)
        yield counter
        for name, key, doc in _GAUGES:
            labels = ("run", "channel", *(("quantile",) if key == "latency" else ()))
            gauge = GaugeMetricFamily(name, doc, labels=labels, unit=_unit(name))
            for values, v in sorted(gauges[key].items()):
                gauge.add_metric((run, *values), v)
            yield gauge
        for name, doc, n in (
            ("streamscope_probe_records_total",
             "Probe records the monitor took since the run started.", records),
            ("streamscope_probe_records_dropped_total",
             "Probe records refused (their buffer was full) since the run started.", dropped),
        ):  # fmt: skip
            counter = CounterMetricFamily(name, doc, labels=("run",))
            counter.add_metric((run,), n)
            yield counter
        if cpu_ns is not None:
            counter = CounterMetricFamily(
                "streamscope_monitor_cpu_seconds_total",
                "CPU time of the monitor's process since the run started: what watching costs "
                "besides the probes in the program's threads.",
                labels=("run",),
                unit="seconds",
            )
            counter.add_metric((run,), cpu_ns / 1e9)
            yield counter
        for name, doc, v in (
            ("streamscope_monitor_lag_seconds",
             "How far the monitor was behind the program at its latest frames.", lag_ns / 1e9),
            ("streamscope_run_running", "1 while the run goes on, 0 once it ended.",
             float(running)),
        ):  # fmt: skip
            gauge = GaugeMetricFamily(name, doc, labels=("run",), unit=_unit(name))
            gauge.add_metric((run,), v)
            yield gauge

    # --- the end ----------------------------------------------------------------------------

    def linger_s(self, least_s: float) -> float:
        """How long after the end its final figures are served unless a scrape took them:
        ``least_s``, and where a scraper was seen twice, one of its intervals more
        (``MAX_LINGER_S`` at most)."""
        with self._lock:
            seen = self._scrapes
            interval = seen[1] - seen[0] if len(seen) == 2 else 0.0
        return min(MAX_LINGER_S, least_s + interval)

    def wait_final_scrape(self, least_s: float) -> bool:
        """Wait until a scrape after ``finish`` was answered, or ``linger_s(least_s)`` from
        the end has passed; whether one was."""
        deadline = self._ended_at + self.linger_s(least_s)
        with self._lock:
            return self._lock.wait_for(
                lambda: self._after_end > 0, timeout=max(0.0, deadline - time.monotonic())
            )


#: The gauges of channels: name, the values' key, help.
_GAUGES = (
    ("streamscope_channel_occupancy_items", "occupancy",
     "Time-weighted mean items in the channel over its latest frame."),
    ("streamscope_channel_occupancy_max_items", "occupancy_max",
     "Most items in the channel in its latest frame."),
    ("streamscope_channel_latency_mean_seconds", "latency_mean",
     "Mean time an item spent in the channel, over its latest frame with items."),
    ("streamscope_channel_latency_seconds", "latency",
     "Quantiles of the time items spent in the channel, over its latest frame with items."),
)  # fmt: skip


def _unit(name: str) -> str:
    """The unit a metric's name ends with, for OpenMetrics' ``# UNIT`` (none: "")."""
    return next((u for u in ("seconds", "items") if name.endswith("_" + u)), "")


def _seconds(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e9


#: Guards every metrics server's count of connections in this process.
_SERVING = threading.Lock()


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per scrape, each streamscope's own (no stage of a program run as it is);
    closing it waits for the answers under way."""

    daemon_threads = False
    block_on_close = True
    #: Connections the system holds for it to take (a burst of them is taken at once, the
    #: ones past the cap closed at once, not left to be taken seconds later).
    request_queue_size = 128
    #: Connections being answered now (each in a thread of its own), and those closed unanswered.
    active = 0
    refused = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out or broke is let go quietly: no traceback on the
        command's stderr per connection (anything else is a fault, said as the server says
        it)."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with _SERVING:
            full = self.active >= MAX_CONNECTIONS
            if full:
                self.refused += 1
            else:
                self.active += 1
        if full:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            with _SERVING:
                self.active -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        own_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            with _SERVING:
                self.active -= 1


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape."""


class MetricsServer:
    """``RunMetrics`` served at ``/metrics`` in a daemon thread of streamscope's own."""

    def __init__(self, metrics: RunMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host, self.port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Listen (``OSError`` if it cannot), serve in a thread; the metrics' address."""
        from prometheus_client import CollectorRegistry, make_wsgi_app

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.metrics)
        family, _, _, _, address = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        ip = str(address[0])
        server_class = _Server6 if family == socket.AF_INET6 else _Server
        server = self._server = server_class((ip, self.port), _Quiet)
        server.set_app(make_wsgi_app(registry))
        self.port = int(server.server_address[1])

        def serve() -> None:
            own_thread()
            server.serve_forever(poll_interval=0.1)

        self._thread = threading.Thread(target=serve, name="streamscope-metrics", daemon=True)
        self._thread.start()
        shown = f"[{ip}]" if family == socket.AF_INET6 else ip
        return f"http://{shown}:{self.port}/metrics"

    def stop(self, linger_s: float = 0.0) -> None:
        """The run ended: serve its final figures until a scrape took them or the linger
        (``RunMetrics.linger_s``, from the end) is over, then stop."""
        self.metrics.finish()
        if self._server is None:
            return
        if linger_s > 0:
            self.metrics.wait_final_scrape(linger_s)
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)


__all__ = [
    "DEFAULT_HOST",
    "MAX_CONNECTIONS",
    "MAX_LINGER_S",
    "MetricsServer",
    "RunMetrics",
    "metrics_address",
]
