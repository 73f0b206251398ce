"""One self-contained HTML page for a run: findings first, the pipeline drawn with its
performance, per-query figures, virtual queues, clock calibration, drops and a comparison
(each section built by its module in ``sections/``, from the pieces in ``markup``).

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
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from streamscope.report.markup import Page, esc, header
from streamscope.report.sections import DEFAULT_SECTIONS, Context, ReportSection
from streamscope.store.reader import Run

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; "
    "base-uri 'none'"
)
PLOT_CONFIG = {"responsive": True, "displaylogo": False, "scrollZoom": False}

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
.ss-flame-stage{margin:6px 0}.flame-wrap{margin:6px 0 12px}
.ss-flame text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
fill:#1f2937;pointer-events:none}
.ss-flame rect{stroke:#fff;stroke-width:.5}.ss-flame g:hover rect{stroke:#0f172a}
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
function fit(svg){
if(!svg)return;
var wrap=svg.parentNode.getBoundingClientRect(),r=svg.getBoundingClientRect();
if(!r.width)return;
var shown=0,trimmed=0;
svg.querySelectorAll('g.ss-frame').forEach(function(g){
var t=g.querySelector('text');if(!t)return;
var w=parseFloat(g.querySelector('rect').getAttribute('width'))-5,s=t.textContent;
while(s.length>2&&t.getComputedTextLength()>w){s=s.slice(0,-2)+'\u2026';t.textContent=s;trimmed++}
if(t.getComputedTextLength()>w){t.textContent=''}else{shown++}
});
svg.setAttribute('data-shown',[wrap.width,r.width,r.height,shown,trimmed].map(Math.round).join(','));
}
function flames(){
document.querySelectorAll('details.ss-flame-stage').forEach(function(d){
fit(d.querySelector('svg.ss-flame'));
d.addEventListener('toggle',function(){try{fit(d.querySelector('svg.ss-flame'))}catch(e){E.push('flame: '+e)}});
});
}
function done(n,ok){
try{graph()}catch(e){E.push('graph: '+e)}
try{flames()}catch(e){E.push('flame: '+e)}
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


def render(
    run: Run,
    compare_with: Run | None = None,
    sections: Sequence[ReportSection] = DEFAULT_SECTIONS,
) -> tuple[str, list[str]]:
    """The report page and the ids of its sections, in order (those with something to show)."""
    page = Page()
    ctx = Context(run, page, compare_with)
    shown = [(s, html) for s in sections if (html := s.render(ctx))]
    return _document(page, run, shown), [s.id for s, _ in shown]


def _document(page: Page, run: Run, shown: list[tuple[ReportSection, str]]) -> str:
    """The whole page: its head (plotly.js inlined), header, navigation, sections, and the data
    block of its figures."""
    from plotly.offline import get_plotlyjs

    nav = "".join(f'<a href="#{s.id}">{esc(s.title)}</a>' for s, _ in shown)
    js = get_plotlyjs().replace("</script", "<\\/script")
    generated = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>streamscope report: {esc(run.meta.name)}</title>"
        f"<style>{CSS}</style>"
        f"<script>{COLLECTOR}</script>"
        f"<script>{js}</script>"
        f'</head><body data-ready="0">{header(run)}<nav>{nav}</nav><main>'
        '<div id="ss-errors" class="error"></div>'
        + "".join(html for _, html in shown)
        + f'<p class="muted">Generated {esc(generated)} by streamscope {esc(run.meta.version)}. '
        'Every number here is in the run file: <code>streamscope sql RUN "SELECT ..."</code>.'
        "</p></main>"
        f'<script type="application/json" id="ss-plot-config">{_json_script(PLOT_CONFIG)}'
        "</script>"
        f'<script type="application/json" id="ss-figures">{_json_script(page.figures)}</script>'
        f"<script>{RENDER}</script></body></html>\n"
    )
