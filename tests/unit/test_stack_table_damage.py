"""A process's stack table file is in the run's directory, which any process of the user can
write: the monitor passes over lines its sampler never writes and reads the others."""

from __future__ import annotations

import random
from pathlib import Path

from streamscope.reduction.stacks import OTHER, StackCounts


def test_lines_no_sampler_writes_are_passed_over(tmp_path: Path) -> None:
    table = tmp_path / "stacks-1.tsv"
    junk = random.Random(47).randbytes(4000).replace(b"\n", b"")
    table.write_bytes(
        b"#period\tzz\n#period\t99999999999999999999999\n#cost\t1\tb\t3\n\xc2\xb2\tq\tf\tg\t1\n"
        + junk
        + b"\n#period\t5000000\n5\t1\tf\t/a/b.py\t3\n"
    )
    counts = StackCounts(1_000_000, None)
    counts.add_probe(1, str(table))
    t = counts.tables[1]
    assert t.stack(5) == "f (b.py:3)"
    assert t.stack(6) == OTHER
    assert t.period_ns == 5_000_000 and t.cost is None
