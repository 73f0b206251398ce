"""One self-contained HTML page for a run: findings first, the pipeline drawn with its
performance, per-query figures, virtual queues, clock calibration, drops and a comparison.

In: a ``Run`` (and optionally a second one to compare with). Out: the page's text and the names
of the sections it holds. plotly.js is inlined once (``plotly.offline.get_plotlyjs``); every
figure is a JSON spec in one data block, drawn by ``Plotly.newPlot`` when the page loads. A
Content-Security-Policy forbids every fetch, so the page works offline or not at all. A small
collector counts script errors, unhandled rejections, ``console.error`` calls and blocked
fetches, and writes the count into ``<body data-errors>`` once the figures are drawn (with
``data-plots`` and ``data-rendered``), and where the pipeline graph's stage boxes were drawn
(``data-shown``, ``data-boxes`` on its ``<svg>``), so a headless browser can check the page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from streamscope.analysis import channel_summary, compare, findings, stage_breakdown
from streamscope.core.fmt import fmt_ns
from streamscope.core.fmt import fmt_num as fmt
from streamscope.report import data as rd
from streamscope.report import figures as fg
from streamscope.report.graph import STATES, pipeline_svg
from streamscope.store.reader import Run

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; "
    "base-uri 'none'"
)
PLOT_CONFIG = {"responsive": True, "displaylogo": False, "scrollZoom": False}
SEVERITY_ORDER = {"problem": 0, "warning": 1, "info": 2}

CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:#0f172a;background:#f8fafc}
header{background:#0f172a;color:#f8fafc;padding:16px 28px}
header h1{margin:0 0 4px;font-size:20px}
header .meta{color:#cbd5e1;font-size:13px}
nav{position:sticky;top:0;z-index:10;background:#e2e8f0;padding:6px 28px;font-size:13px}
nav a{margin-right:14px;color:#1e3a8a;text-decoration:none}
main{padding:8px 28px 40px;max-width:1500px}
section{background:#fff;border:1px solid #e2e8f0;border-radius:8px;margin:18px 0;padding:14px 18px}
h2{font-size:17px;margin:2px 0 10px}
h3{font-size:15px;margin:16px 0 6px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border-bottom:1px solid #e5e7eb;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f1f5f9;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:4px;padding:0 7px;font-size:12px;font-weight:600;
color:#fff}
.sev-problem{background:#b91c1c}.sev-warning{background:#d97706}.sev-info{background:#2563eb}
.v-consistent,.v-better{background:#15803d}.v-rejected,.v-worse{background:#b91c1c}
.v-same,.v-none{background:#64748b}
.finding{border-left:4px solid #cbd5e1;padding:6px 12px;margin:8px 0;background:#f8fafc}
.finding.problem{border-color:#b91c1c}.finding.warning{border-color:#d97706}
.finding.info{border-color:#2563eb}
.finding .title{font-weight:600}
.finding .suggest{color:#065f46}
.muted{color:#64748b}
.error{background:#fee2e2;border:1px solid #fca5a5;padding:8px 12px;border-radius:6px}
.graph-wrap{overflow-x:auto}
.ss-graph text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
fill:#0f172a}
.ss-graph .ss-stage-name{font-weight:700;font-size:14px}
.ss-graph .ss-small{font-size:11.5px}.ss-graph .ss-tiny{font-size:10px;fill:#475569}
.ss-graph .ss-muted{fill:#94a3b8}.ss-graph .ss-vq{font-weight:700}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:10px}
.ss-plot{min-height:260px;border:1px solid #f1f5f9;border-radius:6px}
details summary{cursor:pointer;color:#1e3a8a}
#ss-errors{display:none}
"""

COLLECTOR = """
window.__ssErrors=[];
(function(){
var E=window.__ssErrors;
window.addEventListener('error',function(e){E.push('error: '+(e.message||e.type))});
window.addEventListener('unhandledrejection',function(e){E.push('rejection: '+e.reason)});
document.addEventListener('securitypolicyviolation',function(e){
E.push('blocked fetch: '+e.blockedURI+' ('+e.violatedDirective+')')});
var ce=console.error;console.error=function(){
E.push('console.error: '+Array.prototype.join.call(arguments,' '));
return ce.apply(console,arguments)};
})();
"""

RENDER = """
(function(){
var E=window.__ssErrors;
function graph(){
var svg=document.querySelector('svg.ss-graph');if(!svg)return;
var wrap=svg.parentNode.getBoundingClientRect(),r=svg.getBoundingClientRect();
svg.setAttribute('data-shown',[wrap.width,r.width,r.height].map(Math.round).join(','));
var boxes=[];document.querySelectorAll('svg.ss-graph .ss-stage-box').forEach(function(b){
var q=b.getBoundingClientRect();
boxes.push([q.left-r.left,q.top-r.top,q.width,q.height].map(function(v){return v.toFixed(1)}).join(','))});
svg.setAttribute('data-boxes',boxes.join(';'));
}
function done(n,ok){
try{graph()}catch(e){E.push('graph: '+e)}
document.body.setAttribute('data-plots',String(n));
document.body.setAttribute('data-rendered',String(ok));
document.body.setAttribute('data-errors',String(E.length));
document.body.setAttribute('data-ready','1');
if(E.length){var box=document.getElementById('ss-errors');box.style.display='block';
box.textContent='This page hit '+E.length+' error(s): '+E.join(' | ');}
}
function render(){
var divs=document.querySelectorAll('.ss-plot');
if(typeof Plotly==='undefined'){E.push('plotly.js did not load');done(divs.length,0);return;}
var figs=JSON.parse(document.getElementById('ss-figures').textContent);
var config=JSON.parse(document.getElementById('ss-plot-config').textContent);
var ok=0,jobs=[];
divs.forEach(function(div){
var f=figs[div.getAttribute('data-fig')];
if(!f){E.push('no figure '+div.getAttribute('data-fig'));return;}
try{jobs.push(Promise.resolve(Plotly.newPlot(div,f.data,f.layout,config)).then(function(){ok++},
function(e){E.push('plot '+div.id+': '+e)}));}
catch(e){E.push('plot '+div.id+': '+e)}
});
Promise.all(jobs).then(function(){done(divs.length,ok)},function(){done(divs.length,ok)});
}
if(document.readyState==='complete'){render()}else{window.addEventListener('load',render)}
})();
"""


def _e(s: object) -> str:
    return escape(str(s), quote=True)


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinity replaced by ``None`` (JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_script(obj: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>`` or ``&`` survive as themselves."""
    text = json.dumps(_finite(obj), separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def table(head: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> str:
    """An HTML table; every cell is escaped, numbers are right-aligned."""
    out = [f'<table class="{_e(cls)}"><thead><tr>']
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        for cell in row:
            num = isinstance(cell, (int, float)) and not isinstance(cell, bool)
            text = fmt(cell) if num or cell is None or isinstance(cell, bool) else str(cell)
            out.append(f'<td class="num">{_e(text)}</td>' if num else f"<td>{_e(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def badge(text: str, cls: str) -> str:
    return f'<span class="badge {_e(cls)}">{_e(text)}</span>'


class Page:
    """Collects figures (each a ``<div class="ss-plot">`` and its spec) while sections are built."""

    def __init__(self) -> None:
        self.figures: dict[str, fg.Figure] = {}

    def plot(self, fig: fg.Figure | None, name: str) -> str:
        if fig is None:
            return ""
        fid = f"fig{len(self.figures)}"
        self.figures[fid] = fig
        h = int(fig.get("layout", {}).get("height", 320))
        return (
            f'<div class="ss-plot" id="{fid}" data-fig="{fid}" data-name="{_e(name)}" '
            f'style="height:{h}px"></div>'
        )


def _header(run: Run) -> str:
    m = run.meta
    started = (
        datetime.fromtimestamp(m.started_unix_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if m.started_unix_ns
        else "-"
    )
    bits = [
        f"status <b>{_e(run.status)}</b>",
        f"duration {_e(fmt_ns(run.duration_ns))}",
        f"default frame {_e(fmt_ns(m.frame_ns))}",
        f"pipeline {_e(run.topology.name)}",
        f"app {_e(m.app or '-')}",
        f"host {_e(m.host or '-')}",
        f"started {_e(started)}",
        f"streamscope {_e(m.version)}",
    ]
    out = f"<header><h1>streamscope report: {_e(m.name)}</h1>"
    out += f'<div class="meta">{" · ".join(bits)}</div>'
    if m.command:
        out += f'<div class="meta mono">{_e(m.command)}</div>'
    return out + "</header>"


def _findings(run: Run) -> str:
    fs = sorted(findings(run), key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    out = ['<section id="findings"><h2>Findings</h2>']
    if run.status != "completed":
        why = f": {run.error}" if run.error else ""
        out.append(f'<div class="error">The run is <b>{_e(run.status)}</b>{_e(why)}</div>')
    if not fs:
        out.append('<p class="muted">Nothing stands out in this run.</p>')
    for f in fs:
        sev = f.severity if f.severity in SEVERITY_ORDER else "info"
        out.append(
            f'<div class="finding {sev}" data-kind="{_e(f.kind)}">'
            f'{badge(f.severity, "sev-" + sev)} <span class="title">{_e(f.title)}</span>'
            f' <span class="muted">({_e(f.kind)}{", " + _e(f.target) if f.target else ""})</span>'
            f"<div>{_e(f.detail)}</div>"
        )
        if f.suggestion:
            out.append(f'<div class="suggest">→ {_e(f.suggestion)}</div>')
        if f.evidence:
            rows = [(k, json.dumps(v, default=str)[:300]) for k, v in f.evidence.items()]
            out.append(f"<details><summary>evidence</summary>{table(('', ''), rows)}</details>")
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _workers(run: Run) -> dict[str, list[tuple[str, dict[str, float]]]]:
    """Per stage, each worker's resource and share of its known time in each state."""
    t = run.table("worker")
    out: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for i in range(len(t.get("stage", ()))):
        known = {st: float(t[f"{st}_ns"][i]) for st, _ in STATES}
        total = sum(known.values())
        shares = {st: v / total for st, v in known.items()} if total > 0 else {}
        out.setdefault(str(t["stage"][i]), []).append((str(t["resource"][i]), shares))
    return out


def _bottleneck(run: Run) -> list[str]:
    """The stages the findings name the bottleneck (a group's members)."""
    out: list[str] = []
    for f in findings(run):
        if f.kind == "bottleneck":
            members = f.evidence.get("members") if isinstance(f.evidence, dict) else None
            out += [str(m) for m in members] if isinstance(members, list | tuple) else [f.target]
    return out


def _pipeline(run: Run) -> str:
    stages = stage_breakdown(run)
    channels = channel_summary(run)
    svg = pipeline_svg(
        run.topology,
        {s.stage: s for s in stages},
        {c.channel: c for c in channels},
        _bottleneck(run),
    )
    out = [
        '<section id="pipeline"><h2>Pipeline</h2>',
        '<p class="muted">Stages in topological order, left to right; each with the share of '
        "its observed time in each state, each channel with its mean occupancy against its "
        "capacity (the tick marks the maximum) and its throughput. Dashed: a link to a device, "
        "estimated as a virtual queue. Outlined in red: the bottleneck. Hover for the "
        "figures.</p>",
        f'<div class="graph-wrap">{svg}</div>',
        "<h3>Stages</h3>",
    ]
    rows = []
    workers = _workers(run)
    for s in stages:
        row: list[object] = [s.stage, s.resource]
        row += [pct(getattr(s, st)) for st, _ in STATES]
        row += [pct(_opt(s, c)) for c in ("computation", "communication", "other")]
        rows.append(row)
        mine = workers.get(s.stage, [])
        if len(mine) > 1:  # the per-worker breakdown of a stage worked in by several
            for k, (resource, shares) in enumerate(mine, start=1):
                rows.append([f"  worker {k}", resource, *(pct(shares.get(st)) for st, _ in STATES),
                             "", "", ""])  # fmt: skip
    head = ["stage", "resource", *(s for s, _ in STATES), "computation", "communication", "other"]
    out.append(table(head, rows))
    out.append("<h3>Channels</h3>")
    crow = [
        [
            c.channel,
            c.transport,
            c.capacity,
            c.mean_occupancy,
            c.max_occupancy,
            pct(c.full_fraction),
            pct(c.empty_fraction),
            c.throughput_per_s,
            ("virtual queue: " + (c.verdict or "unchecked")) if c.virtual else "",
            " · ".join(
                f"{k} {pct(v)}"
                for k in ("transferring", "idle", "blocking")
                if (v := _opt(c, k)) is not None
            ),
        ]
        for c in channels
    ]
    out.append(
        table(
            [
                "channel",
                "transport",
                "capacity",
                "mean occupancy",
                "max",
                "full",
                "empty",
                "throughput (items/s)",
                "virtual",
                "communication",
            ],
            crow,
        )
    )
    out.append("</section>")
    return "".join(out)


def _opt(obj: object, name: str) -> float | None:
    v = getattr(obj, name, None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _queries(page: Page, qs: list[rd.QuerySeries]) -> tuple[str, str, str]:
    """The per-query, histogram and box-whisker sections."""
    main = ['<section id="queries"><h2>Queries per frame</h2>']
    hist = ['<section id="histograms"><h2>Histograms</h2>']
    boxes = ['<section id="latency"><h2>Latency box-whisker plots</h2>']
    n_hist = n_box = 0
    if not qs:
        main.append('<p class="muted">The run has no queries.</p>')
    for q in qs:
        frames = max((len(t.frames) for t in q.targets), default=0)
        main.append(
            f'<h3 id="q{q.id}">q{q.id}: <code>{_e(q.text)}</code></h3>'
            f'<p class="muted">{_e(q.metric)} in {_e(q.unit)}, frames of '
            f"{_e(fmt_ns(q.frame_ns))}; {frames} frames; targets: "
            f"{_e(', '.join(t.target for t in q.targets) or '-')}</p>"
        )
        plots = []
        if q.metric == "state":
            plots += [page.plot(fg.duty(q, ts), f"q{q.id} duty {ts.target}") for ts in q.targets]
        plots.append(page.plot(fg.timeseries(q), f"q{q.id} per frame"))
        plots.append(page.plot(fg.clock_stats(q), f"q{q.id} clock"))
        plots = [p for p in plots if p]
        if plots:
            main.append(f'<div class="plots">{"".join(plots)}</div>')
        else:
            main.append('<p class="muted">No frames with data.</p>')
        hs = fg.histograms(q)
        if hs:
            n_hist += 1
            hist.append(f"<h3>q{q.id}: <code>{_e(q.text)}</code></h3>")
            divs = "".join(page.plot(h, f"q{q.id} histogram") for h in hs)
            hist.append(f'<div class="plots">{divs}</div>')
        b = fg.box(q)
        if b is not None:
            n_box += 1
            boxes.append(f"<h3>q{q.id}: <code>{_e(q.text)}</code></h3>")
            boxes.append(page.plot(b, f"q{q.id} box"))
    if not n_hist:
        hist.append('<p class="muted">No query asked for a histogram.</p>')
    if not n_box:
        boxes.append(
            '<p class="muted">No query asked for a box summary (add <code>box</code> to a '
            "latency query: <code>latency(a -&gt; b): box</code>).</p>"
        )
    for part in (main, hist, boxes):
        part.append("</section>")
    return "".join(main), "".join(hist), "".join(boxes)


def _virtual_queues(page: Page, run: Run) -> str:
    vqs = run.virtual_queues()
    out = ['<section id="virtual-queues"><h2>Virtual queues</h2>']
    if not vqs:
        out.append(
            '<p class="muted">No virtual queue: no occupancy query on a link channel.</p></section>'
        )
        return "".join(out)
    out.append(
        '<p class="muted">A link channel\'s occupancy is estimated per frame by simulation '
        "(tail buffer, bulk-transfer bus, head buffer) and checked against the two measured "
        "buffers: a frame is rejected when W1 between measured and predicted buffers exceeds "
        "its threshold; the run is rejected when more frames are rejected than chance explains."
        "</p>"
    )
    for v in vqs:
        target = str(v["target"])
        verdict = str(v.get("verdict") or "none")
        out.append(
            f'<h3 class="ss-vq-title" data-verdict="{_e(verdict)}">{_e(target)} '
            f'{badge(verdict, "v-" + verdict)} <span class="muted">({_e(v.get("model"))} '
            f"model, q{_e(v.get('query_id'))})</span></h3>"
        )
        out.append(
            table(
                [
                    "frames checked",
                    "rejected",
                    "alpha",
                    "p-value",
                    "W1 self-check (items)",
                    "W1 to truth (items)",
                    "W1 ideal queue to truth",
                    "arrivals model (frames)",
                    "i.i.d. gaps",
                    "dependence p",
                    "W1 i.i.d. model to truth",
                ],
                [
                    [
                        v.get("frames"),
                        v.get("frames_rejected"),
                        v.get("alpha"),
                        v.get("p_value"),
                        v.get("w1_items"),
                        v.get("w1_truth_items"),
                        v.get("w1_truth_ideal_items"),
                        ", ".join(f"{k} {n}" for k, n in v["arrivals_used"].items()) or None,
                        v.get("renewal_verdict"),
                        v.get("dependence_p"),
                        v.get("w1_truth_renewal_items"),
                    ]
                ],
            )
        )
        out.append(
            '<p class="muted">Arrivals model: <b>profile</b> frames are simulated with the '
            "insertions the device counted per sub-window (bursts kept), <b>renewal</b> frames "
            "with gaps drawn independently from the histogram (the seed's model). i.i.d. gaps: "
            "the self-check's verdict on the renewal model; rejected means the source's gaps "
            "depend on each other.</p>"
        )
        frames = list(v.get("frames_detail") or [])
        levels = rd.vq_levels(run, int(v["query_id"]), target)
        plots = []
        if frames:
            plots.append(page.plot(fg.vq_selfcheck(target, frames), f"vq {target} self-check"))
            plots.append(page.plot(fg.vq_means(target, frames), f"vq {target} means"))
        out.append(f'<div class="plots">{"".join(plots)}</div>')
        if levels.overall:
            out.append(page.plot(fg.vq_levels(target, levels), f"vq {target} levels"))
        cols = [
            "frame",
            "arrivals",
            "verdict",
            "renewal_verdict",
            "dependence_p",
            "w1_items",
            "threshold_items",
            "clock_bias_items",
            "tv",
            "predicted_mean",
            "ideal_mean",
            "tail_mean",
            "head_mean",
            "items_in",
            "items_out",
            "truth_mean",
            "w1_truth_items",
            "renewal_mean",
            "w1_truth_renewal_items",
        ]
        rows = [[f.get(c) for c in cols] for f in frames]
        out.append(
            f"<details><summary>every frame ({len(rows)})</summary>{table(cols, rows)}</details>"
        )
    out.append("</section>")
    return "".join(out)


def _clocks(page: Page, run: Run) -> str:
    domains = rd.clock_domains(run)
    out = ['<section id="clocks"><h2>Clock domains</h2>']
    if not domains:
        out.append(
            '<p class="muted">Every stage ran on the host clock: nothing to calibrate.</p>'
            "</section>"
        )
        return "".join(out)
    out.append(
        '<p class="muted">Each domain is calibrated by bursts of round trips (host time before '
        "the request t1, the domain's counter t2, host time after t3); each burst is fitted "
        "(host ns = s · (ticks − x0) + b) with hard bounds that contain the truth.</p>"
    )
    for cd in domains:
        out.append(
            f'<h3>{_e(cd.domain)} <span class="muted">(nominal tick {fmt(cd.tick_period_ns)} ns, '
            f"{len(cd.fits)} bursts, {cd.exchange_count:,} round trips)</span></h3>"
        )
        rows = []
        for f in cd.fits:
            s = f.get("s_ns_per_tick")
            ppm = (float(s) / cd.tick_period_ns - 1) * 1e6 if s is not None else None
            rows.append(
                [
                    f.get("burst"),
                    f.get("method"),
                    f.get("n"),
                    f"{float(s):.9f}" if s is not None else "-",
                    ppm,
                    fmt_ns(f.get("rtt_min_ns")),
                    fmt_ns(f.get("bound_width_ns")),
                    fmt_ns(f.get("residual_rms_ns")),
                    f.get("feasible"),
                ]
            )
        out.append(
            table(
                [
                    "burst",
                    "method",
                    "round trips",
                    "s (ns/tick)",
                    "rate error (ppm)",
                    "rtt min",
                    "bound width",
                    "residual rms",
                    "feasible",
                ],
                rows,
            )
        )
        plots = [page.plot(fg.clock_fits(cd), f"clock {cd.domain} fits")]
        if cd.exchanges is not None:
            plots.append(page.plot(fg.clock_exchanges(cd), f"clock {cd.domain} exchanges"))
        elif cd.exchange_count:
            plots.append(
                f'<p class="muted">{cd.exchange_count:,} round trips: too many to draw '
                f"(more than {rd.MAX_EXCHANGES:,}).</p>"
            )
        out.append(f'<div class="plots">{"".join(plots)}</div>')
    out.append("</section>")
    return "".join(out)


def _drops(run: Run) -> str:
    dropped, kept = rd.total_records(run)
    out = ['<section id="drops"><h2>Probe records</h2>']
    if not dropped:
        out.append(f'<p class="muted">No probe record was dropped ({kept:,} kept).</p>')
    else:
        share = dropped / (dropped + kept) if dropped + kept else 0.0
        out.append(
            f"<p>{dropped:,} records were dropped ({pct(share)} of {dropped + kept:,}); "
            "frames that lost records under-count.</p>"
        )
        out.append(table(["probe", "dropped", "kept"], rd.drops(run)))
    out.append("</section>")
    return "".join(out)


def _overhead(run: Run) -> str:
    rows = run.overhead()
    out = ['<section id="overhead"><h2>Monitoring overhead</h2>']
    if not rows:
        out.append('<p class="muted">No probe was active.</p>')
    else:
        events = sum(r["events"] for r in rows)
        seconds = (run.duration_ns or 0) / 1e9
        rate = f" ({events / seconds:,.0f} per second)" if seconds else ""
        out.append(
            f"<p>{events:,} probe events{rate}. Probe time is estimated: each probe's events "
            "times the cost of one event, measured in its process when the run started.</p>"
        )
        body = [
            [
                r["stage"],
                r["probes"],
                f"{r['events']:,}",
                "-" if r["events_per_s"] is None else f"{r['events_per_s']:,.0f}",
                fmt_ns(r["est_probe_ns"]),
                pct(r["fraction"]),
            ]
            for r in rows
        ]
        out.append(
            table(["stage", "probes", "events", "events/s", "probe time", "of the run"], body)
        )
    out.append("</section>")
    return "".join(out)


def _profiles(run: Run, top: int = 20) -> str:
    rows = run.profiles()
    if not rows:
        return ""
    out = ['<section id="profiles"><h2>Function profiles</h2>']
    out.append(
        "<p>Traced function calls per stage (enter and exit of each call): total time "
        "includes callees, self time does not.</p>"
    )
    for stage in dict.fromkeys(r["stage"] for r in rows):
        mine = [r for r in rows if r["stage"] == stage][:top]
        out.append(f"<h3>{_e(stage)}</h3>")
        body = [
            [r["function"], f"{r['calls']:,}", fmt_ns(r["total_ns"]), fmt_ns(r["self_ns"]),
             fmt_ns(r["max_ns"])]
            for r in mine
        ]  # fmt: skip
        out.append(table(["function", "calls", "total", "self", "longest"], body, "ss-profile"))
    excluded = run.trace_exclusions()
    if excluded:
        items = "".join(f"<li>{_e(k)}: {_e(v)}</li>" for k, v in excluded.items())
        out.append(f"<p>Not traced:</p><ul>{items}</ul>")
    out.append("</section>")
    return "".join(out)


def _compare(page: Page, run: Run, other: Run) -> str:
    d = compare(run, other).to_dict()
    out = ['<section id="compare"><h2>Comparison</h2>']
    headline = d.get("headline")
    if headline:  # first: is the other run faster?
        out.append(f'<p class="ss-compare-headline"><b>{_e(headline)}</b></p>')
    out.append(
        f"<p>This run (a): <b>{_e(run.meta.name)}</b> ({_e(run.path or run.meta.run_id)}); "
        f"other run (b): <b>{_e(other.meta.name)}</b> ({_e(other.path or other.meta.run_id)})</p>"
    )
    summary = d.get("summary")
    if summary:
        out.append(f'<p class="ss-compare-summary"><b>{_e(summary)}</b></p>')
    rows = [r for r in d.get("rows", []) if isinstance(r, dict)]
    if rows:
        out.append(page.plot(fg.compare_bars(rows), "compare"))
        keys = ["query", "target", "stat", "a", "b", "delta", "verdict"]
        keys += sorted({k for r in rows for k in r} - set(keys))
        body = []
        for r in rows:
            cells: list[object] = [r.get(k) for k in keys]
            body.append(cells)
        out.append(table(keys, body, "ss-compare"))
    else:
        out.append('<p class="muted">Nothing in common to compare.</p>')
    rest = {k: v for k, v in d.items() if k not in ("rows", "summary", "headline")}
    if rest:
        blob = json.dumps(rest, indent=1, default=str)
        out.append(f"<details><summary>details</summary><pre>{_e(blob)}</pre></details>")
    out.append("</section>")
    return "".join(out)


def render(run: Run, compare_with: Run | None = None) -> tuple[str, list[str]]:
    """The report page and the ids of its sections, in order."""
    from plotly.offline import get_plotlyjs

    page = Page()
    qs = rd.query_series(run)
    parts = [_findings(run), _pipeline(run)]
    parts += list(_queries(page, qs))
    parts += [_virtual_queues(page, run), _clocks(page, run), _drops(run), _overhead(run)]
    parts += [p for p in (_profiles(run),) if p]
    if compare_with is not None:
        parts.append(_compare(page, run, compare_with))
    sections = [p.split('id="', 1)[1].split('"', 1)[0] for p in parts]
    titles = {
        "findings": "Findings",
        "pipeline": "Pipeline",
        "queries": "Queries",
        "histograms": "Histograms",
        "latency": "Latency",
        "virtual-queues": "Virtual queues",
        "clocks": "Clocks",
        "drops": "Drops",
        "overhead": "Overhead",
        "profiles": "Profiles",
        "compare": "Comparison",
    }
    nav = "".join(f'<a href="#{s}">{_e(titles.get(s, s))}</a>' for s in sections)
    js = get_plotlyjs().replace("</script", "<\\/script")
    generated = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    html = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>streamscope report: {_e(run.meta.name)}</title>"
        f"<style>{CSS}</style>"
        f"<script>{COLLECTOR}</script>"
        f"<script>{js}</script>"
        f'</head><body data-ready="0">{_header(run)}<nav>{nav}</nav><main>'
        '<div id="ss-errors" class="error"></div>'
        + "".join(parts)
        + f'<p class="muted">Generated {_e(generated)} by streamscope {_e(run.meta.version)}. '
        'Every number here is in the run file: <code>streamscope sql RUN "SELECT ..."</code>.'
        "</p></main>"
        f'<script type="application/json" id="ss-plot-config">{_json_script(PLOT_CONFIG)}'
        "</script>"
        f'<script type="application/json" id="ss-figures">{_json_script(page.figures)}</script>'
        f"<script>{RENDER}</script></body></html>\n"
    )
    return html, sections
