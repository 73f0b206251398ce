"""The command line runs one command with that command's parser alone: the same command, the
same help, the same errors as the whole command line's."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from streamscope.cli.app import COMMANDS, _typer, app


@pytest.mark.parametrize("name", [*COMMANDS, "hw"])
def test_a_commands_own_parser_says_what_the_whole_one_says(name: str) -> None:
    runner = CliRunner()
    alone = _typer(name)
    for args in ([name, "-h"], [name, "--no-such-option"]):
        whole, own = runner.invoke(app, args), runner.invoke(alone, args)
        assert (own.exit_code, own.output) == (whole.exit_code, whole.output), args
    assert "Usage: streamscope " + name in runner.invoke(alone, [name, "-h"]).output


def test_only_the_command_asked_for_is_built() -> None:
    runner = CliRunner()
    other = runner.invoke(_typer("show"), ["sql", "x.duckdb", "SELECT 1"])
    assert other.exit_code == 2 and "No such command 'sql'" in other.output
