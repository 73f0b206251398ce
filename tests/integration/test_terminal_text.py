"""Names a program gives reach the terminal shown, never acted on, and its run file is its
owner's alone.

One recorded run of ``apps/escaped_names.py`` (a thread named ``ESC ]0;pwned BEL evil ESC [2J``,
one named ``[bold]sink[/bold]``), its live view on a console rich treats as a terminal; then
every command that reads it, at once. Nothing they write may hold a control character but
newline, tab, carriage return and rich's own styles and cursor moves; the names are there,
escaped (``\\x1b]0;pwned\\x07evil\\x1b[2J``) and their markup as written.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from oracles import is_monitor
from watched import cli

APP = Path(__file__).parent / "apps" / "escaped_names.py"
NAME = "\x1b]0;pwned\x07evil\x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07evil\\x1b[2J"
MARKUP = "[bold]sink[/bold]"
#: What a terminal would act on: controls but tab, newline and carriage return; DEL; the C1
#: controls; and any byte that is not UTF-8 (decoded as a lone surrogate).
ACTED_ON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\udc80-\udcff]")
#: What rich itself writes for a terminal: colours and styles (SGR), the cursor hidden and
#: shown, a line erased and the cursor moved up (its live view).
RICH = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[lh]|2K|[0-9]*A)")
#: A console that rich treats as a terminal though it is a pipe, wide enough for whole names.
STYLED = {"FORCE_COLOR": "1", "COLUMNS": "250"}


@dataclass(frozen=True)
class Recorded:
    out: Path
    #: What ``streamscope run`` wrote on stderr: its live view, summary and findings.
    said: str
    #: The mode of each file beside the run file (itself included) while the program ran.
    modes: dict[str, int]
    #: The monitor process's umask while the program ran.
    monitor_umask: int


def decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def assert_inert(text: str, what: str) -> None:
    left = RICH.sub("", text)
    bad = sorted({f"{ord(c):#x}" for c in ACTED_ON.findall(left)})
    assert not bad, f"{what} writes {bad}: {left[:2000]!r}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    d = tmp_path_factory.mktemp("escaped")
    out, go = d / "run.duckdb", d / "go"
    os.mkfifo(go)
    proc = subprocess.Popen(
        [*cli(), "run", str(APP), "-o", str(out), "--", "300", str(go)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={**os.environ, **STYLED}, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    err: list[bytes] = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    drain.start()
    try:
        assert proc.stdout.readline() == b"ready\n"  # the program runs; it waits for us
        # The program does not wait for its monitor: the run file comes when it comes (after
        # its lock and its reserve), then everything beside it is there.
        while not out.exists():
            assert proc.poll() is None, "the run ended before its file was made"
            time.sleep(0.01)
        modes = {}
        for p in d.iterdir():
            if p.name.startswith(out.name):
                with contextlib.suppress(FileNotFoundError):  # DuckDB's log, folded meanwhile
                    modes[p.name] = stat.S_IMODE(p.stat().st_mode)
        (monitor,) = [p for p in psutil.Process(proc.pid).children(recursive=True)
                      if is_monitor(p)]  # fmt: skip
        status = Path(f"/proc/{monitor.pid}/status").read_text()
        umask = int(re.search(r"Umask:\s*([0-7]+)", status).group(1), 8)  # type: ignore[union-attr]
        with go.open("w") as f:
            f.write("go")
        assert proc.stdout.read() == b"done\n"
        assert proc.wait(timeout=300) == 0
        drain.join()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Recorded(out, decoded(err[0]), modes, umask)


def test_the_run_file_and_what_is_beside_it_are_private(recorded: Recorded) -> None:
    name = recorded.out.name
    assert {name, f"{name}.lock", f"{name}.reserve"} <= set(recorded.modes), recorded.modes
    assert set(recorded.modes.values()) == {0o600}, recorded.modes  # the log too, if there
    assert recorded.monitor_umask & 0o077 == 0o077  # whatever DuckDB makes there is private
    assert stat.S_IMODE(recorded.out.stat().st_mode) == 0o600
    assert [p.name for p in recorded.out.parent.iterdir() if p.name.startswith(name)] == [name]


def test_the_live_view_and_summary_show_names_escaped(recorded: Recorded) -> None:
    assert_inert(recorded.said, "streamscope run")
    assert SHOWN in recorded.said and MARKUP in recorded.said
    assert "\x1b[1m" in recorded.said  # styled, as on a terminal


def on_a_terminal(args: list[str]) -> str:
    """What ``streamscope ARGS`` writes on stdout when it is a terminal (a few lines: they
    fit the terminal's buffer until the command ends)."""
    main, side = os.openpty()
    try:
        r = subprocess.run([*cli(), *args], stdout=side, stderr=subprocess.PIPE, timeout=300,
                           check=False, stdin=subprocess.DEVNULL)  # fmt: skip
        assert r.returncode == 0, r.stderr
    finally:
        os.close(side)
    chunks = []
    try:
        while chunk := os.read(main, 1 << 16):
            chunks.append(chunk)
    except OSError:  # EIO: read to the end, the other side closed
        pass
    finally:
        os.close(main)
    return decoded(b"".join(chunks))


def test_every_command_shows_names_escaped(recorded: Recorded, tmp_path: Path) -> None:
    run = str(recorded.out)
    commands = {
        "show": ["show", run],
        "sql": ["sql", run, "SELECT name, named_by FROM stage"],
        "whatif": ["whatif", run, "--set", f"{NAME}.replicas=2", "--replications", "2"],
        "whatif unknown": ["whatif", run, "--set", "nosuch.replicas=2"],
        "compare": ["compare", run, run],
        "report": ["report", run, "-o", str(tmp_path / "r.html")],
        "export": ["export", run, "-o", str(tmp_path / "r.json")],
        "csv": ["sql", run, "SELECT name FROM stage", "--format", "csv"],
    }

    def call(args: list[str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*cli(), *args], capture_output=True, timeout=300, check=False,
            stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "250"},
        )  # fmt: skip

    with ThreadPoolExecutor(len(commands) + 1) as pool:
        done = {k: pool.submit(call, v) for k, v in commands.items()}
        on_terminal = pool.submit(on_a_terminal, commands["csv"])
        got = {k: f.result() for k, f in done.items()}
    # CSV is data: exact where it goes to a file or a program, shown safe on a terminal
    assert NAME in decoded(got.pop("csv").stdout)
    assert_inert(on_terminal.result(), "sql --format csv on a terminal")
    assert SHOWN in on_terminal.result() and MARKUP in on_terminal.result()
    for what, r in got.items():
        out, err = decoded(r.stdout), decoded(r.stderr)
        assert_inert(out, f"{what}'s stdout")
        assert_inert(err, f"{what}'s stderr")
        if what in ("report", "export"):
            assert r.returncode == 0 and out, err
        elif what == "whatif unknown":  # the stages it knows, named as they are shown
            assert r.returncode == 2 and SHOWN in err and MARKUP in err, err
        else:  # whatif: its prediction, or why the model predicts nothing (status 3)
            assert r.returncode in ((0, 3) if what == "whatif" else (0,)), err
            assert SHOWN in out, (what, out)
            assert MARKUP in out or what == "whatif", (what, out)
