"""``mqctl broker``: run a broker node."""

from __future__ import annotations

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True)


@app.command("start")
def start() -> None:
    """Start a broker node (arrives with the broker node)."""
    raise typer.Exit(2)
