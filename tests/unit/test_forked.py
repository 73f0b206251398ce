"""A module run as ``__main__`` in a forked child (``core.forked``): it runs as ``python -m``
would run it, named, its stdout a pipe to the parent, its status read as ``subprocess`` reads
one; a process with another thread does not fork."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MODULE = """
import sys, time
comm = open("/proc/self/comm").read().strip()
stdin = sys.stdin.read()
print(__name__, sys.argv[1:], comm, repr(stdin), flush=True)
if sys.argv[1:] == ["sleep"]:
    time.sleep(60)
sys.exit(3)
"""

PARENT = """
import atexit, json, signal, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from streamscope.core.forked import Forked, alone, fork_module
atexit.register(lambda: print("the parent's exit handler", flush=True))
out = {"alone": alone()}
child = fork_module("child_mod", ["a", "b"], "streamscope-tst")
out["forked"] = isinstance(child, Forked)
out["said"] = child.stdout.read().strip()
out["status"] = child.wait()
sleeper = fork_module("child_mod", ["sleep"], "streamscope-tst")
try:
    sleeper.wait(timeout=0.05)
except subprocess.TimeoutExpired:
    out["timed_out"] = True
sleeper.kill()
out["killed"] = sleeper.wait()
t = threading.Thread(target=time.sleep, args=(2,))
t.start()
out["with_a_thread"] = fork_module("child_mod", [], "streamscope-tst")
t.join()
print(json.dumps(out), flush=True)
"""


def test_a_module_runs_in_a_forked_child_as_python_m_runs_it(tmp_path: Path) -> None:
    (tmp_path / "child_mod.py").write_text(MODULE)
    ran = subprocess.run([sys.executable, "-c", PARENT, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = ran.stdout.splitlines()
    # the child's exit ran none of the parent's exit handlers: the parent's ran once, last
    assert lines[-1] == "the parent's exit handler" and lines.count(lines[-1]) == 1
    out = json.loads(lines[-2])
    assert out["alone"] and out["forked"]
    assert out["said"] == "__main__ ['a', 'b'] streamscope-tst ''"  # its stdin: nothing
    assert out["status"] == 3
    assert out["timed_out"] and out["killed"] == -9
    assert out["with_a_thread"] is None  # not forked: the caller starts it afresh
