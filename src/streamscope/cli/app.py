"""The ``streamscope`` command's commands: one module per subcommand, each a thin adapter over a
library call; ``main`` runs one (``streamscope.cli.main`` loads this module when asked more
than ``--version``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from streamscope.cli import calibrate as calibrate_cmd
from streamscope.cli import compare as compare_cmd
from streamscope.cli import export as export_cmd
from streamscope.cli import hw as hw_cmd
from streamscope.cli import report as report_cmd
from streamscope.cli import retime as retime_cmd
from streamscope.cli import run as run_cmd
from streamscope.cli import show as show_cmd
from streamscope.cli import sql as sql_cmd
from streamscope.cli import whatif as whatif_cmd
from streamscope.cli.common import fail
from streamscope.core.errors import StreamscopeError


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


#: The commands, by name, in the order ``--help`` lists them (``hw``: a group of its own).
COMMANDS: dict[str, Callable[..., Any]] = {
    "run": run_cmd.run, "show": show_cmd.show, "sql": sql_cmd.sql,
    "calibrate": calibrate_cmd.calibrate, "retime": retime_cmd.retime,
    "report": report_cmd.report, "compare": compare_cmd.compare, "export": export_cmd.export,
    "whatif": whatif_cmd.whatif,
}  # fmt: skip


def _typer(only: str | None = None) -> typer.Typer:
    """The command line with every command, or with the command ``only`` alone: what runs one
    command builds its parser only (the parsers of all of them were some 11 ms of each)."""
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
    for name, command in COMMANDS.items():
        if only in (None, name):
            settings = {"ignore_unknown_options": False} if name == "run" else None
            made.command(name, context_settings=settings)(command)
    if only in (None, "hw"):
        made.add_typer(hw_cmd.app, name="hw")
    return made


app = _typer()

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Bad input never ends in a traceback."""
    try:
        args = sys.argv[1:] if argv is None else argv
        named = args[0] if args and (args[0] in COMMANDS or args[0] == "hw") else None
        result = (app if named is None else _typer(named))(args=args, standalone_mode=False)
    except StreamscopeError as exc:
        return fail(str(exc), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        return fail("interrupted", 130)
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
