"""mqctl's root app through its real entry point."""

from __future__ import annotations

from typer.testing import CliRunner

from cli.main import app

runner = CliRunner()


def test_help_lists_command_groups() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for group in ("standalone", "broker", "admin"):
        assert group in result.output


def test_unknown_command_fails() -> None:
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code != 0
