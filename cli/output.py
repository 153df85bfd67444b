"""The one place mqctl prints: data goes to stdout, messages and errors to stderr.

Read commands take ``--output table|json|yaml``. JSON is for scripts and stays stable: keys sorted,
two-space indent, the API's field names unchanged, lists as arrays (never the paginated envelope).
Tables are for people and may change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = (
    "OutputFormat",
    "abort",
    "emit",
    "emit_record",
    "error",
    "info",
    "print_json",
    "print_table",
    "progress",
    "success",
    "to_json",
    "warn",
    "write_bytes",
)

PIPE_WIDTH = 200
_consoles: dict[bool, Console] = {}


def _console(stderr: bool) -> Console:
    """Rich consoles, made on first use: importing rich costs ~0.2 s that ``--help`` should not pay."""
    found = _consoles.get(stderr)
    if found is None:
        from rich.console import Console

        found = _consoles[stderr] = Console(stderr=stderr)
        if not found.is_terminal and "COLUMNS" not in os.environ:
            # Piped tables: wide enough that cells are not folded mid-word for grep and awk.
            found.width = PIPE_WIDTH
    return found


def __getattr__(name: str) -> Console:
    # ``output.console`` / ``output.err_console`` stay importable names, created lazily (PEP 562).
    if name == "console":
        return _console(False)
    if name == "err_console":
        return _console(True)
    raise AttributeError(name)


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def info(text: str) -> None:
    _console(True).print(text, highlight=False)


def success(text: str) -> None:
    _console(True).print(f"[green]{text}[/green]", highlight=False)


def warn(text: str) -> None:
    _console(True).print(f"[yellow]warning:[/yellow] {text}", highlight=False)


def error(text: str) -> None:
    """One line on stderr; markup in ``text`` is not interpreted (it may echo user input)."""
    _console(True).print("[red]error:[/red] ", end="", highlight=False)
    _console(True).print(text, markup=False, highlight=False, soft_wrap=True)


def abort(text: str, code: int = 1) -> NoReturn:
    """Print one line for people on stderr and exit with ``code``."""
    error(text)
    raise typer.Exit(code)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def print_json(data: Any) -> None:
    typer.echo(to_json(data))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], title: str | None = None) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns), end_section=False)
    _console(False).print(table)


def _print_fields(obj: Mapping[str, Any], fields: Sequence[str] | None, title: str | None) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name in fields or list(obj):
        if name in obj:
            table.add_row(name, _cell(obj[name]))
    _console(False).print(table)


def emit(
    data: Any,
    fmt: OutputFormat | str = OutputFormat.TABLE,
    columns: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> None:
    """Print ``data`` (a list of rows or one object) on stdout in ``fmt``.

    Tables show ``columns`` (a list) or the fields in ``columns`` order (one object); JSON and YAML
    always carry every field.
    """
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.JSON:
        print_json(data)
    elif fmt is OutputFormat.YAML:
        import yaml

        typer.echo(
            yaml.safe_dump(data, sort_keys=True, allow_unicode=True, default_flow_style=False), nl=False
        )
    elif isinstance(data, list) and not data:
        info("nothing to show")
    elif isinstance(data, list):
        print_table(data, columns or (list(data[0]) if data else ["-"]), title=title)
    elif isinstance(data, Mapping):
        _print_fields(data, columns, title)
    else:
        _console(False).print(_cell(data), highlight=False, markup=False)


def emit_record(record: Mapping[str, Any], fmt: OutputFormat | str, line: str) -> None:
    """One record of a stream (``message consume``): a JSON line, a YAML document, or ``line``."""
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.JSON:
        typer.echo(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str))
    elif fmt is OutputFormat.YAML:
        import yaml

        typer.echo("---\n" + yaml.safe_dump(dict(record), sort_keys=True, allow_unicode=True), nl=False)
    else:
        _console(False).print(line, highlight=False, markup=False, soft_wrap=True)


def write_bytes(data: bytes) -> None:
    """Raw bytes to stdout (a message body), untouched."""
    typer.get_binary_stream("stdout").write(data)


@contextmanager
def progress(description: str, total: float | None) -> Iterator[tuple[Progress, Any]]:
    """A progress bar on stderr (shown only on a terminal); yields (progress, task id)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(True),
        transient=False,
        disable=not _console(True).is_terminal,
    )
    with bar:
        yield bar, bar.add_task(description, total=total)
