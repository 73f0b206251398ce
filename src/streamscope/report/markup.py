"""The HTML pieces every section of the report page uses: escaping, tables, badges, the
figure collector (``Page``), and the page's header.

In: text, rows of cells, figure specifications, a ``Run``'s metadata. Out: HTML text, every
piece of it escaped; numbers formatted by ``core.fmt`` as in the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape

from streamscope.core.fmt import fmt_ns
from streamscope.core.fmt import fmt_num as fmt
from streamscope.report.figures.spec import Figure
from streamscope.store.reader import Run


def esc(s: object) -> str:
    """``s`` as HTML text or an attribute's value."""
    return escape(str(s), quote=True)


def table(head: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> str:
    """An HTML table; every cell is escaped, numbers are right-aligned."""
    out = [f'<table class="{esc(cls)}"><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        for cell in row:
            num = isinstance(cell, (int, float)) and not isinstance(cell, bool)
            text = fmt(cell) if num or cell is None or isinstance(cell, bool) else str(cell)
            out.append(f'<td class="num">{esc(text)}</td>' if num else f"<td>{esc(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def badge(text: str, cls: str) -> str:
    return f'<span class="badge {esc(cls)}">{esc(text)}</span>'


class Page:
    """Collects figures (each a ``<div class="ss-plot">`` and its spec) while sections are built.
    It grows as the sections are built: the page's data block is written once they all are."""

    def __init__(self) -> None:
        self.figures: dict[str, Figure] = {}

    def plot(self, fig: Figure | None, name: str) -> str:
        """The place of figure ``fig`` on the page (nothing for no figure)."""
        if fig is None:
            return ""
        fid = f"fig{len(self.figures)}"
        self.figures[fid] = fig
        h = int(fig.get("layout", {}).get("height", 320))
        return (
            f'<div class="ss-plot" id="{fid}" data-fig="{fid}" data-name="{esc(name)}" '
            f'style="height:{h}px"></div>'
        )


def header(run: Run) -> str:
    """The page's header: the run's name, how it ended, and where and when it ran."""
    m = run.meta
    started = (
        datetime.fromtimestamp(m.started_unix_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if m.started_unix_ns
        else "-"
    )
    bits = [
        f"status <b>{esc(run.status)}</b>",
        f"duration {esc(fmt_ns(run.duration_ns))}",
        f"default frame {esc(fmt_ns(m.frame_ns))}",
        f"pipeline {esc(run.topology.name)}",
        f"app {esc(m.app or '-')}",
        f"host {esc(m.host or '-')}",
        f"started {esc(started)}",
        f"streamscope {esc(m.version)}",
    ]
    out = f"<header><h1>streamscope report: {esc(m.name)}</h1>"
    out += f'<div class="meta">{" · ".join(bits)}</div>'
    if m.command:
        out += f'<div class="meta mono">{esc(m.command)}</div>'
    return out + "</header>"
