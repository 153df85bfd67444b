"""mqctl: the command line for MQCloud tenants and operators.

Command groups live in ``cli/commands/<group>.py``, each a Typer app attached here. Heavy imports
(grpc, the SDK, subprocess management) happen inside command bodies so ``mqctl --help`` stays fast.
"""

from __future__ import annotations

import os

import typer

from cli.commands import admin, broker, standalone
from cli.config import AppEnvVars

__all__ = ("app", "main")

app = typer.Typer(
    name="mqctl",
    help="MQCloud command line: run the stack, manage tenants and topics, produce and consume.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=bool(os.environ.get(AppEnvVars.DEBUG)),
)
app.command("standalone", help="Run the control plane, Celery and a broker on this machine.")(
    standalone.standalone
)
app.add_typer(broker.app, name="broker", help="Run a broker node.")
app.add_typer(admin.app, name="admin", help="Administer a broker node directly over gRPC.")


def main() -> None:
    app(prog_name="mqctl")


if __name__ == "__main__":
    main()
