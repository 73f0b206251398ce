"""A plain install, without the extras: every Python process of these runs finds neither Ray nor
Amaranth (a ``sitecustomize`` on its path refuses them, and notes each refusal), as after
``pip install streamscope``. Threads, processes and the emulated device run and are read back
without them; hosts, the probe cores and the RTL device end in one line naming the extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from watched import cli

ROOT = Path(__file__).parents[2]
APPS = Path(__file__).parent / "apps"
#: What the processes must not import, and a file each refusal is noted in (by its name).
REFUSED = ("ray", "amaranth")
LOG_VAR = "REFUSED_IMPORTS_LOG"
BLOCKER = f"""
import os
import sys


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {REFUSED!r}:
            with open(os.environ[{LOG_VAR!r}], "a") as log:
                log.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""
HW = "streamscope: error: the FPGA probe cores need Amaranth: pip install 'streamscope[hw]'"
RTL = (
    "streamscope: error: device 'fpga': an RTL device's probe cores need Amaranth: "
    "pip install 'streamscope[hw]'"
)
HOSTS = "streamscope: error: hosts need Ray: pip install 'streamscope[hosts]'"


class Plain:
    """Runs Python, and ``streamscope``, as a plain install would."""

    def __init__(self, tmp: Path) -> None:
        site = tmp / "plain-site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(BLOCKER)
        self.log = tmp / "refused.txt"
        self.cwd = tmp
        path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
        self.env = {**os.environ, "PYTHONPATH": path, LOG_VAR: str(self.log)}

    def __call__(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout_s, check=False,
            stdin=subprocess.DEVNULL, env=self.env, cwd=self.cwd,
        )  # fmt: skip

    def streamscope(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self(*cli(), *args)

    def refused(self) -> list[str]:
        """Every import of Ray or Amaranth tried so far, by any process."""
        return self.log.read_text().split() if self.log.exists() else []


@pytest.fixture
def plain(tmp_path: Path) -> Plain:
    return Plain(tmp_path)


def _one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    """Exit status 2 and ``expected`` as the whole of stderr: no traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [expected], done.stderr[-3000:]


def test_the_blocker_refuses_what_it_should(plain: Plain) -> None:
    """What the tests below lean on: an import of either fails, as it would uninstalled."""
    for name in REFUSED:
        done = plain(sys.executable, "-c", f"import {name}")
        assert done.returncode == 1
        assert f"ModuleNotFoundError: No module named {name!r}" in done.stderr
    assert plain.refused() == list(REFUSED)


def test_every_module_outside_hw_imports_without_the_extras(plain: Plain) -> None:
    """``import streamscope``, and every module of it but the probe cores' package, imports
    nothing of either (the refusals would be noted even where an import error was caught)."""
    # By the files (pkgutil.walk_packages would import streamscope.hw itself to look in it).
    script = textwrap.dedent("""
        import importlib, pathlib, streamscope
        src = pathlib.Path(streamscope.__file__).parent
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src.parent).with_suffix("").parts
            if parts[1] != "hw" and parts[-1] != "__main__":
                importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        print("imported")
    """)
    done = plain(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "imported"
    assert plain.refused() == []


def test_a_threaded_program_is_run_and_read_back(plain: Plain) -> None:
    out = plain.cwd / "run.duckdb"
    program = str(APPS / "threads_program.py")
    done = plain.streamscope("run", program, "-o", str(out), "--quiet", "--", "100", "truth.json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.exists()
    shown = plain.streamscope("show", str(out))
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "reader -> parser" in shown.stdout
    for args in (
        ("sql", str(out), "SELECT count(*) FROM stage"),
        ("report", str(out), "-o", str(plain.cwd / "run.html")),
        ("export", str(out)),
        ("compare", str(out), str(out)),
    ):
        done = plain.streamscope(*args)
        assert done.returncode == 0, f"{args[0]}: {done.stderr[-3000:]}"
    assert plain.refused() == []


def test_a_pipeline_on_the_emulated_device_runs(plain: Plain) -> None:
    out = plain.cwd / "laplace.duckdb"
    app = str(ROOT / "examples" / "laplace.py")
    done = plain.streamscope(
        "run", app, "-o", str(out), "--quiet", "--", "--walks", "2", "--blocks", "300", "--quiet"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.exists()
    assert plain.refused() == []


@pytest.mark.parametrize("args", [["list"], ["verilog", "timestamp"], ["map", "timestamp"]])
def test_the_probe_cores_name_their_extra(plain: Plain, args: list[str]) -> None:
    _one_line(plain.streamscope("hw", *args), HW)
    helped = plain.streamscope("hw", "--help")  # what there is stays readable
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "verilog" in helped.stdout


def test_an_rtl_device_names_its_extra_before_it_runs(plain: Plain) -> None:
    out = plain.cwd / "rtl.duckdb"
    app = str(ROOT / "examples" / "laplace.py")
    _one_line(plain.streamscope("run", app, "-o", str(out), "--", "--rtl"), RTL)
    assert not out.exists()


@pytest.mark.parametrize("joined", [False, True], ids=["started", "ray-address"])
def test_hosts_name_their_extra(plain: Plain, joined: bool) -> None:
    """Whether the cluster would be started here or joined (at an address where nothing
    answers: Ray is asked for first)."""
    out = plain.cwd / "hosts.duckdb"
    where = ["--ray-address", "127.0.0.1:1"] if joined else []
    app = str(APPS / "hosts_program.py")
    _one_line(plain.streamscope("run", app, "-o", str(out), *where, "--", "--items", "5"), HOSTS)
    assert not out.exists()


def test_the_python_api_raises_its_own_error_naming_the_extra(plain: Plain) -> None:
    """From Python: a ``StreamscopeError`` (an ``ImportError`` too) whose ``extra`` says what to
    install, when the part is asked for and before anything runs."""
    script = textwrap.dedent(f"""
        import sys
        import streamscope as ss
        sys.path.insert(0, {str(APPS)!r})
        from hosts_program import pipeline

        def said(call):
            try:
                call()
            except ss.StreamscopeError as exc:
                assert isinstance(exc, ImportError)
                print(exc.extra, exc, sep=": ")
            else:
                print("no error")

        said(lambda: ss.EmulatedDevice("fpga", rtl=True))
        said(lambda: __import__("streamscope.hw.cores"))
        said(lambda: ss.run(pipeline(["--items", "5"]), []))
    """)
    done = plain(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        RTL.replace("streamscope: error:", "hw:"),
        HW.replace("streamscope: error:", "hw:"),
        HOSTS.replace("streamscope: error:", "hosts:"),
    ]
