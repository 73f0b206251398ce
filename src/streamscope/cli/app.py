"""The ``streamscope`` command's commands: one module per subcommand, each a thin adapter over a
library call; ``main`` runs one (``streamscope.cli.main`` loads this module when asked more
than ``--version``)."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

import typer

from streamscope.cli.common import fail
from streamscope.cli.interrupted import interrupted
from streamscope.core.errors import StreamscopeError
from streamscope.runtime.heldsignals import HeldSignals


def _version(value: bool) -> None:
    if value:
        from streamscope.core.version import VERSION

        typer.echo(f"streamscope {VERSION}")
        raise typer.Exit()


def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Monitor streaming pipelines: ask performance queries, run, and read per-frame results."""


#: The commands, by name, in the order ``--help`` lists them (``hw``: a group of its own):
#: each a function of its module (``cli.NAME``), loaded only where its parser is built.
COMMANDS = ("run", "show", "sql", "calibrate", "retime", "report", "compare", "export", "whatif")


def _command(name: str, held: HeldSignals | None = None) -> Callable[..., Any]:
    """The command ``name``; Ctrl-C or a signal that ends it is said (the parser's own
    handling ends it with 130 and nothing said). ``held``: the signals held back while the
    command line is read, let in while the command runs."""
    command: Callable[..., Any] = getattr(importlib.import_module(f"streamscope.cli.{name}"), name)

    @functools.wraps(command)
    def said(*args: Any, **kwargs: Any) -> Any:
        try:
            if held is not None:  # one that came while the command line was read ends it here,
                held.let_in(start=True)  # as does one whose interruption was lost before
            return command(*args, **kwargs)
        except KeyboardInterrupt as exc:
            return interrupted(exc, name)
        finally:
            if held is not None:
                held.hold()  # and one that comes as it returns, once it has (``main``)

    return said


def _typer(only: str | None = None, held: HeldSignals | None = None) -> typer.Typer:
    """The command line with every command, or with the command ``only`` alone: what runs one
    command builds its parser only (the parsers of all of them were some 11 ms of each).
    ``held``: as ``_command``'s."""
    made = typer.Typer(
        name="streamscope",
        help="Monitor streaming pipelines: ask performance queries, run, and read per-frame "
        "results.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    made.callback()(_options)
    for name in COMMANDS:
        if only in (None, name):
            settings = {"ignore_unknown_options": False} if name == "run" else None
            made.command(name, context_settings=settings)(_command(name, held))
    if only in (None, "hw"):
        from streamscope.cli import hw

        made.add_typer(hw.app, name="hw")
    return made


#: The whole command line (``__getattr__`` makes it when this process first asks for it).
app: typer.Typer


def __getattr__(name: str) -> Any:
    """``app``: the whole command line (every command's parser), made when first asked for."""
    if name == "app":
        made = globals()["app"] = _typer()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Bad input never ends in a traceback, nor does Ctrl-C."""
    # Ctrl-C and SIGTERM wait while the command line is read, where the parser would end the
    # command on them with 130 and nothing said: the command, or this, says them.
    held, named = HeldSignals(), None
    try:
        args = sys.argv[1:] if argv is None else argv
        named = args[0] if args and (args[0] in COMMANDS or args[0] == "hw") else None
        held.hold()
        try:
            result = _typer(named, held)(args=args, standalone_mode=False)
        finally:
            held.let_in()
    except StreamscopeError as exc:
        return fail(str(exc), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort) as exc:
        return interrupted(exc, named)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.TyperException as exc:  # usage errors: the parser's own message and status
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            fail(exc.format_message())
        return int(exc.exit_code)
    code = result if isinstance(result, int) else 0
    if code < 0:  # a program killed by a signal: this command ends as it did
        return _die_by(-code)
    return code


#: Signals that end a process without a core dump by default: ``streamscope run`` of a program
#: killed by one of them is killed by it too (a shell sees what it would of the program).
_FATAL = {"SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "SIGPIPE", "SIGALRM", "SIGUSR1", "SIGUSR2"}


def _die_by(sig: int) -> int:
    """End this process by ``sig`` (one of ``_FATAL``), as the program it ran ended; 128 +
    ``sig`` for another signal (a shell's number for it) or if it does not end us."""
    import os
    import signal

    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = ""
    if name in _FATAL:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return 128 + sig


if __name__ == "__main__":
    sys.exit(main())
