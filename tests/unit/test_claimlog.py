"""The claim table's file: appended under its lock, read on by every process, a half-written
line ended and read as nothing."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

from streamscope.pipeline.program.auto import claimlog


def _claim_in_child(directory: str, name: str) -> bool:
    with claimlog.locked(directory) as (table, fd):
        return table.take(fd, name)


def test_what_one_process_appends_the_next_reads(tmp_path: Path) -> None:
    d = str(tmp_path)
    try:
        with claimlog.locked(d) as (table, fd):
            assert table.take(fd, "worker") and not table.take(fd, "worker")
            table.put(fd, "stage|a", ["worker", "function"])
            table.put(fd, "stage|a", ["other", "function"])  # the first value stays
            table.add(fd, "code|q1", ["worker", "function", []])
        ctx = mp.get_context("fork")
        with ctx.Pool(1) as pool:
            # a forked child locks through a descriptor of its own, and agrees
            assert pool.apply(_claim_in_child, (d, "worker")) is False
            assert pool.apply(_claim_in_child, (d, "worker #2")) is True
        claimlog.forget()  # read afresh, as a process spawned later would
        with claimlog.locked(d) as (table, fd):
            assert table.names == {"worker", "worker #2"}
            assert table.values == {"stage|a": ["worker", "function"]}
            assert table.lists == {"code|q1": [["worker", "function", []]]}
        # a thousand claims are one file
        with claimlog.locked(d) as (table, fd):
            for n in range(1000):
                table.take(fd, f"t{n}")
        assert os.listdir(d) == [claimlog.LOG]
    finally:
        claimlog.forget()


def test_a_line_a_killed_process_left_half_written_is_read_as_nothing(tmp_path: Path) -> None:
    d = str(tmp_path)
    try:
        with claimlog.locked(d) as (table, fd):
            assert table.take(fd, "a")
        with open(tmp_path / claimlog.LOG, "ab") as f:
            f.write(b'["n", "half')  # its writer died here, its lock gone with it
        claimlog.forget()
        with claimlog.locked(d) as (table, fd):
            assert table.names == {"a"}
            assert table.take(fd, "b")
        claimlog.forget()
        with claimlog.locked(d) as (table, fd):
            assert table.names == {"a", "b"}
        lines = (tmp_path / claimlog.LOG).read_bytes().splitlines()
        assert lines[1] == b'["n", "half' and len(lines) == 3
    finally:
        claimlog.forget()
