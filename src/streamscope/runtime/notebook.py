"""streamscope in IPython and Jupyter: ``%load_ext streamscope``.

In: an IPython shell. Out: a run, a run's result and a watching session shown as HTML
(``report.notebook``: findings, the pipeline graph, its tables), and the cell magic
``%%streamscope [QUERY ...] [--out FILE]``: the cell run inside ``ss.watch`` (its standard
queues, threads, processes and tasks watched as they are), then its run shown.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from streamscope.report.notebook import result_html, run_html
from streamscope.runtime.instrument import Session, watch
from streamscope.runtime.options import RunOptions, RunResult
from streamscope.store.reader import Run


def session_html(session: Session) -> str | None:
    """A session's run once its block ended (None while it runs)."""
    return None if session.result is None else result_html(session.result)


def run_cell(line: str, cell: str, namespace: dict[str, Any]) -> RunResult | None:
    """``%%streamscope``: ``cell`` run in ``namespace`` inside ``watch``, with the queries and
    ``--out FILE`` that ``line`` gives; the run's result."""
    words = shlex.split(line)
    out = None
    if "--out" in words:
        at = words.index("--out")
        out, words = Path(words[at + 1]), words[:at] + words[at + 2 :]
    options = RunOptions(out=out, overwrite=True) if out is not None else None
    with watch(words, options) as session:
        exec(compile(cell, "<cell>", "exec"), namespace)  # noqa: S102 - the user's own cell
    return session.result


def register(ipython: Any) -> None:
    """Register the HTML of runs, results and sessions and the ``%%streamscope`` magic."""
    html = ipython.display_formatter.formatters["text/html"]
    html.for_type(RunResult, result_html)
    html.for_type(Session, session_html)
    html.for_type(Run, run_html)

    def streamscope(line: str, cell: str) -> RunResult | None:
        return run_cell(line, cell, ipython.user_ns)

    ipython.register_magic_function(streamscope, magic_kind="cell", magic_name="streamscope")
