"""Each program's own truth: when its last stage finished each item (``done``), written to the
file ``--stamps`` names at its end (nanoseconds of ``time.perf_counter_ns``, one per line)."""

import sys
import time

_done: list[int] = []


def done() -> None:
    _done.append(time.perf_counter_ns())


def save(path: str | None) -> None:
    if path:
        with open(path, "w") as f:
            f.write("\n".join(map(str, _done)))


def arg(name: str, default: float) -> float:
    """``--name VALUE`` from the command line (a plain program's own options); ``items``
    times ``--scale``."""
    flag = f"--{name}"
    value = float(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else default
    if name == "items" and "--scale" in sys.argv:
        value = max(value * float(sys.argv[sys.argv.index("--scale") + 1]), 20)
    return value


def stamps_path() -> str | None:
    return sys.argv[sys.argv.index("--stamps") + 1] if "--stamps" in sys.argv else None
