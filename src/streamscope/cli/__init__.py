"""The ``streamscope`` command (its commands: ``cli.app``). ``--version`` is answered here, before
the commands and their libraries are loaded; ``run`` starts its monitor process here, ahead,
so that the monitor loads its own libraries while this process loads the command's. From its
first instant, Ctrl-C or SIGTERM ends ``run`` as docs/cli.md says (``entry``)."""

from __future__ import annotations

import sys

__all__ = ["entry", "main"]


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Bad input never ends in a traceback, nor does a signal."""
    args = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv, args)
    except KeyboardInterrupt as exc:  # before the command was read, or as it ended
        from streamscope.cli.interrupted import interrupted

        return interrupted(exc, args[0] if args else None)


def _main(argv: list[str] | None, args: list[str]) -> int:
    if args == ["--version"]:
        from streamscope.core.version import VERSION

        print(f"streamscope {VERSION}")
        return 0
    if _monitored(args):
        from streamscope.core import ahead

        fork = argv is None  # this process is the command (not a caller's, with its threads)
        if fork:
            # The modules the command and its monitor both load (some 70 ms): loaded here
            # once, the monitor forked from it starts with them and loads only its own.
            import streamscope.monitor.settings
            import streamscope.probes.taps
            import streamscope.query.follow
            import streamscope.runtime.launch  # noqa: F401
        from streamscope.monitor import PROCESS_NAME

        ahead.start("streamscope.monitor", fork_as=PROCESS_NAME if fork else None)
    if args[:1] != ["run"]:  # a run's program inherits this process's environment
        from streamscope.core.process import one_math_thread

        one_math_thread()
    from streamscope.cli.app import main as run

    try:
        return run(argv)
    finally:
        if _monitored(args):
            ahead.drop_all()  # one the command did not take (it failed before its run)


def entry() -> None:
    """The ``streamscope`` command: ``main``, then this process ends at once where ending it
    the long way would do nothing more (``core.process.end_now``). ``run`` ends on SIGTERM as
    on Ctrl-C from here on, before anything else is loaded."""
    from streamscope.core.process import end_now

    if sys.argv[1:2] == ["run"]:
        from streamscope.runtime.heldsignals import interrupting

        interrupting()  # none lost on the way, even where Python drops what a handler raises
    end_now(main())


def _monitored(args: list[str]) -> bool:
    """Whether the command runs something with a monitor process of its own: ``run``, unless
    asked for help or to monitor in this process (``--inline``)."""
    own = args[: args.index("--")] if "--" in args else args
    return own[:1] == ["run"] and not {"-h", "--help", "--inline"} & set(own)
