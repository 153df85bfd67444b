"""``mqctl admin``: drive a broker's admin gRPC API."""

from __future__ import annotations

import typer

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True)
