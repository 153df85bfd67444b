"""Output formats and exit codes: what scripts rely on."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from cli import output
from cli.errors import ExitCode, exit_code_for_status
from cli.main import app

runner = CliRunner()


def test_json_is_sorted_indented_and_unicode(capsys: pytest.CaptureFixture[str]) -> None:
    output.emit([{"b": 1, "a": "é", "c": None}], "json")
    printed = capsys.readouterr().out
    assert printed == '[\n  {\n    "a": "é",\n    "b": 1,\n    "c": null\n  }\n]\n'


def test_yaml_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    row = {"name": "orders", "queues": 8, "tags": ["a", "b"], "fifo": True}
    output.emit(row, "yaml")
    assert yaml.safe_load(capsys.readouterr().out) == row
    output.emit([row], "table", ("name", "fifo", "tags"))
    table = capsys.readouterr().out
    assert "orders" in table and "yes" in table and "a, b" in table and "queues" not in table
    output.emit([], "table", ("name",))
    captured = capsys.readouterr()
    assert captured.out == "" and "nothing" in captured.err


def test_stream_records_are_one_json_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    output.emit_record({"b": 2, "a": 1}, "json", "unused")
    output.emit_record({"b": 3, "a": 4}, "json", "unused")
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1, "b": 2}, {"a": 4, "b": 3}]


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param(400, ExitCode.USAGE, id="invalid"),
        pytest.param(401, ExitCode.UNAUTHENTICATED, id="unauthenticated"),
        pytest.param(403, ExitCode.PERMISSION, id="forbidden"),
        pytest.param(404, ExitCode.NOT_FOUND, id="not-found"),
        pytest.param(409, ExitCode.CONFLICT, id="conflict"),
        pytest.param(503, ExitCode.UNAVAILABLE, id="unavailable"),
        pytest.param(500, ExitCode.ERROR, id="server-error"),
    ],
)
def test_http_status_to_exit_code(status: int, code: ExitCode) -> None:
    assert exit_code_for_status(status) == code


def test_exit_codes_are_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in doc, code


def test_bad_output_format_is_a_usage_error() -> None:
    result = runner.invoke(app, ["context", "list", "-o", "xml"])
    assert result.exit_code == 2
