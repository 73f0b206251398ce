"""``streamscope run --metrics``: its address, and the collector from given frames to what a
scrape reads (names, labels, units, counters that only add up), served on loopback."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.cli.app import main
from streamscope.core.errors import ConfigError
from streamscope.report.metrics import MAX_CONNECTIONS, MetricsServer, RunMetrics, metrics_address

FRAME = 1_000_000_000
#: The default queries' ids, as a run's plan numbers them.
METRICS = {0: "occupancy", 1: "throughput", 2: "latency", 3: "state", 4: "timer"}
STATES = ("idle", "busy", "blocked_in", "blocked_out")


def frames(k: int, *, covered: int = FRAME, rate: float = 40.0) -> list[FrameResult]:
    """Frame ``k`` of every default query on channel ``a -> b`` and stages ``a``, ``b``."""

    def at(qid: int, target: str, *points: object) -> FrameResult:
        return FrameResult(qid, target, k, k * FRAME, (k + 1) * FRAME, covered, points)  # type: ignore[arg-type]

    return [
        at(0, "a -> b", ScalarPoint("mean", 1.5 + k), ScalarPoint("max", 4.0),
           HistogramPoint((0.0, 1.0), (1.0,))),
        at(1, "a -> b", ScalarPoint("mean", rate)),
        at(2, "a -> b", ScalarPoint("mean", 2e6), QuantilesPoint((0.5, 0.99), (1e6, 9e6))),
        at(3, "a", DutyPoint(STATES, (0.0, 0.75, 0.0, 0.25))),
        at(3, "b", DutyPoint(STATES, (0.0, 0.0, 0.0, 0.0))),  # nothing observed: no time
        at(4, "loop0.lag", ScalarPoint("mean", 5.0)),
    ]  # fmt: skip


def scraped(metrics: RunMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """What a scrape in the Prometheus text format reads: (sample name, labels) -> value."""
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(
    got: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return got[(name, tuple(sorted({"run": "r", **labels}.items())))]


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("9464", ("127.0.0.1", 9464)),
        ("0", ("127.0.0.1", 0)),
        ("0.0.0.0:9100", ("0.0.0.0", 9100)),
        ("localhost:65535", ("localhost", 65535)),
        ("[::1]:9464", ("::1", 9464)),
    ],
)
def test_the_address_is_port_or_host_and_port(text: str, address: tuple[str, int]) -> None:
    assert metrics_address(text) == address


@pytest.mark.parametrize("text", ["", "abc", "65536", "-1", "host:", ":9464", "::1:9464", "a:b:1"])
def test_a_bad_address_says_what_is_valid(text: str) -> None:
    with pytest.raises(ConfigError, match=r"bad value for --metrics.*valid: PORT or HOST:PORT"):
        metrics_address(text)


def test_a_bad_address_ends_the_command_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--metrics", "nine", "no-such-app.py"]) == 2
    err = capsys.readouterr().err
    assert "bad value for --metrics: 'nine'" in err and "no-such-app" not in err


def test_names_labels_and_values_come_from_the_frames() -> None:
    metrics = RunMetrics("r", METRICS)
    metrics.on_frames(frames(0), [DropCount(7, 0, dropped=2, recorded=100)])
    metrics.on_lag(25_000_000)
    got = scraped(metrics)
    assert value(got, "streamscope_channel_items_total", channel="a -> b") == 40
    assert value(got, "streamscope_stage_state_seconds_total", stage="a", state="busy") == 0.75
    assert value(got, "streamscope_stage_state_seconds_total", stage="a", state="idle") == 0
    assert not [k for k in got if ("stage", "b") in k[1]]  # a frame it was not seen in
    assert value(got, "streamscope_channel_occupancy_items", channel="a -> b") == 1.5
    assert value(got, "streamscope_channel_occupancy_max_items", channel="a -> b") == 4
    assert value(got, "streamscope_channel_latency_mean_seconds", channel="a -> b") == 0.002
    assert (
        value(got, "streamscope_channel_latency_seconds", channel="a -> b", quantile="0.99")
        == 0.009
    )
    assert value(got, "streamscope_probe_records_total") == 100
    assert value(got, "streamscope_probe_records_dropped_total") == 2
    assert value(got, "streamscope_monitor_lag_seconds") == 0.025
    assert value(got, "streamscope_run_running") == 1
    names = {name for name, _ in got}
    assert all(n.startswith("streamscope_") for n in names)
    assert {label for _, labels in got for label, _ in labels} <= {
        "run", "channel", "stage", "state", "quantile",
    }  # fmt: skip


def test_counters_add_up_from_the_start_and_never_go_down() -> None:
    """Items are each frame's mean rate times its covered time (whole items, as ``show``
    adds them up); provisional frames wait for their final one; gauges are the latest frame's."""
    metrics = RunMetrics("r", METRICS)
    seen = []
    batches = [frames(0), frames(1, rate=0.0), frames(2, covered=FRAME // 4, rate=12.0)]
    for batch in batches:
        metrics.on_frames(batch, [DropCount(1, batch[0].frame, 0, 10)])
        metrics.on_frames([FrameResult(1, "a -> b", 9, 0, 0, FRAME, (ScalarPoint("mean", 1e6),),
                                       provisional=True)], [])  # fmt: skip
        seen.append(scraped(metrics))
    items = [value(g, "streamscope_channel_items_total", channel="a -> b") for g in seen]
    busy = [
        value(g, "streamscope_stage_state_seconds_total", stage="a", state="busy") for g in seen
    ]
    assert items == [40, 40, 43]
    assert busy == [0.75, 1.5, 1.6875]
    assert [value(g, "streamscope_probe_records_total") for g in seen] == [10, 20, 30]
    assert value(seen[-1], "streamscope_channel_occupancy_items", channel="a -> b") == 3.5


def test_a_second_query_of_a_metric_on_a_target_is_not_counted_twice() -> None:
    metrics = RunMetrics("r", {**METRICS, 5: "throughput"})
    again = FrameResult(5, "a -> b", 0, 0, FRAME, FRAME, (ScalarPoint("mean", 40.0),))
    metrics.on_frames([again, *frames(0)], [])
    assert value(scraped(metrics), "streamscope_channel_items_total", channel="a -> b") == 40


def test_openmetrics_says_types_and_units() -> None:
    metrics = RunMetrics("r", METRICS)
    metrics.on_frames(frames(0), [])
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_openmetrics(registry).decode()
    assert "# TYPE streamscope_channel_items counter" in text
    assert "# UNIT streamscope_stage_state_seconds seconds" in text
    assert "# UNIT streamscope_channel_occupancy_items items" in text
    assert text.rstrip().endswith("# EOF")


def test_served_on_loopback_until_a_scrape_after_the_end_took_the_final_figures() -> None:
    metrics = RunMetrics("r", METRICS)
    served = MetricsServer(metrics, "127.0.0.1", 0)
    url = served.start()
    assert url == f"http://127.0.0.1:{served.port}/metrics"
    metrics.on_frames(frames(0), [])

    def scrape(accept: str = "") -> str:
        request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return str(answer.read().decode())

    assert 'streamscope_channel_items_total{channel="a -> b",run="r"} 40.0' in scrape()
    assert scrape("application/openmetrics-text; version=1.0.0").endswith("# EOF\n")
    metrics.on_frames(frames(1), [])
    late: list[str] = []
    scraper = threading.Timer(0.2, lambda: late.append(scrape()))
    scraper.start()
    served.stop(linger_s=5.0)  # returns once the scrape after the end was answered
    scraper.join()
    assert 'streamscope_channel_items_total{channel="a -> b",run="r"} 80.0' in late[0]
    assert 'streamscope_run_running{run="r"} 0.0' in late[0]
    with pytest.raises(urllib.error.URLError, match="refused"):
        scrape()


def test_idle_connections_cost_a_bounded_number_of_threads() -> None:
    """Connections past ``MAX_CONNECTIONS`` are closed unanswered, and a scrape gets in again
    once the idle ones are gone (each is let go after ``REQUEST_TIMEOUT_S`` anyway)."""
    metrics = RunMetrics("r", METRICS)
    served = MetricsServer(metrics, "127.0.0.1", 0)
    url = served.start()
    metrics.on_frames(frames(0), [])
    before = threading.active_count()
    idle = [
        socket.create_connection(("127.0.0.1", served.port)) for _ in range(MAX_CONNECTIONS + 10)
    ]
    try:
        refused = 0
        for s in idle[MAX_CONNECTIONS:]:  # each closed by the server: it reads the end
            s.settimeout(2)  # under the server's own timeout: closed by the cap, not by it
            refused += s.recv(1) == b""
        assert refused == 10
        assert threading.active_count() <= before + MAX_CONNECTIONS
    finally:
        for s in idle:
            s.close()
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert b"streamscope_channel_items_total" in answer.read()
    served.stop()


def test_the_monitors_cpu_is_a_counter_where_it_is_known() -> None:
    metrics = RunMetrics("r", METRICS)
    assert "streamscope_monitor_cpu_seconds_total" not in scrape_text(metrics)
    metrics.on_lag(5_000_000, 2_500_000_000)
    metrics.on_lag(6_000_000, 2_000_000_000)  # a late report never takes it back
    text = scrape_text(metrics)
    assert 'streamscope_monitor_cpu_seconds_total{run="r"} 2.5' in text
    assert 'streamscope_monitor_lag_seconds{run="r"} 0.006' in text


def scrape_text(metrics: RunMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry).decode()
