"""The probe ring's layout has one definition (``core/rings.py``): the native core's header is
generated from it and checked in, and the core built from that header agrees with it."""

from __future__ import annotations

import pytest

from streamscope.core import _ringheader, native, rings


def test_the_checked_in_header_is_the_one_generated_from_rings_py() -> None:
    assert _ringheader.HEADER.read_text() == _ringheader.c_header(), (
        "core/_native_layout.h differs from core/rings.py: "
        "run `python -m streamscope.core._ringheader`"
    )
    assert _ringheader.main(["_ringheader", "--check"]) == 0


def test_a_layout_change_in_python_changes_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails the moment the Python side moves a word."""
    before = _ringheader.c_header()
    monkeypatch.setattr(rings, "W_R", rings.W_R + 1)
    after = _ringheader.c_header()
    assert after != before and f"#define H_R {rings.W_R}\n" in after
    assert _ringheader.main(["_ringheader", "--check"]) == 1


def test_the_built_core_reads_the_same_layout() -> None:
    """The native core (the suite is run where it is built) says the words and sizes it was
    compiled with, and they are ``rings.py``'s. (Its twin reads ``rings.py`` itself.)"""
    core = native.implementations()["native"]
    said = {name: getattr(core, name) for name in dir(core) if name.isupper()}
    said.pop("HEARTBEAT_NS", None)
    assert {"HEADER_BYTES", "RECORD_BYTES", "SAMPLE_EVERY", "W_W", "W_R"} <= set(said)
    assert said == {name: getattr(rings, name) for name in said}
