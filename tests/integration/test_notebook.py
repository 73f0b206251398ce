"""streamscope in a real notebook: executed headless by a Jupyter kernel (nbclient, ipykernel),
its outputs read back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

#: A plain threaded pipeline, as a cell would hold it.
PIPELINE = (Path(__file__).parent / "apps" / "two_stages.py").read_text()


def test_a_notebook_watches_a_plain_threaded_pipeline_and_shows_it(tmp_path: Path) -> None:
    """``%load_ext streamscope``, then a plain threaded pipeline in a ``%%streamscope`` cell:
    the cell's own output stays its own, and its run is shown inline as HTML with the
    bottleneck found and the pipeline graph drawn; ``ss.watch()`` in a cell and the session
    shown after it, and a run loaded from its file, show the same way; a live one updates one
    output in place."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext streamscope"),
        nbformat.v4.new_code_cell("%%streamscope --out cell.duckdb\n" + PIPELINE + 'print("done")'),
        nbformat.v4.new_code_cell(
            "import streamscope as ss\nwith ss.watch() as session:\n"
            + "".join(f"    {ln}\n" for ln in PIPELINE.splitlines())
            + "session"
        ),
        nbformat.v4.new_code_cell('ss.load("cell.duckdb")'),
        nbformat.v4.new_code_cell(
            'with ss.watch(["occupancy(* -> *): mean every 100ms"], live=True):\n'
            + "".join(f"    {ln}\n" for ln in PIPELINE.splitlines())
        ),
    ]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})  # fmt: skip
    client.execute()
    magic, watched, loaded = nb.cells[1].outputs, nb.cells[2].outputs, nb.cells[3].outputs
    assert [o.get("text") for o in magic if o.output_type == "stream"] == ["done\n"], magic
    for outputs in (magic, watched, loaded):
        (shown,) = [o for o in outputs if o.output_type in ("execute_result", "display_data")]
        html = shown["data"]["text/html"]
        assert html.startswith('<div class="ss-nb">'), html[:200]
        assert re.search(r"stage \S*work\S* is rate-limiting", html), html[:3000]
        assert '<svg class="ss-graph' in html and "ss-stage-box" in html
        assert "<style>" in html and "\nbody{" not in html  # its styles are its own
    assert (tmp_path / "cell.duckdb").exists()
    # live: one output, its table updated in place as frames close (not a line per frame)
    live = nb.cells[4].outputs
    assert not [o for o in live if o.output_type == "stream" and "q0" in o.text], live
    (table,) = [o for o in live if o.output_type == "display_data"]
    text = table["data"]["text/plain"]
    assert "latest frames" in text and "mean=" in text, text
