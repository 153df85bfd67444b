"""The one place mqctl prints: data goes to stdout, messages and errors to stderr."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

__all__ = ("abort", "console", "err_console", "info", "print_json", "print_table", "success")

console = Console()
err_console = Console(stderr=True)


def info(text: str) -> None:
    err_console.print(text)


def success(text: str) -> None:
    err_console.print(f"[green]{text}[/green]")


def abort(text: str, code: int = 1) -> NoReturn:
    """Print one line for people on stderr and exit with ``code``."""
    err_console.print(f"[red]error:[/red] {text}", highlight=False)
    raise typer.Exit(code)


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))


def print_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], title: str | None = None) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row.get(c, "")) for c in columns))
    console.print(table)
