"""``mqctl offset``: move a consumer group's position on a topic (live consumers move at once)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

import typer

from cli import output
from cli.commands.groups import find as find_group
from cli.errors import CliError, ExitCode
from cli.options import Output, Tenant
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Consumer offsets: reset to the beginning, the end or a time.")


class ResetTo(StrEnum):
    BEGINNING = "beginning"
    END = "end"
    TIME = "time"


@app.command("reset")
def reset(
    group: Annotated[str, typer.Option("--group", "-g", help="Consumer group.")],
    topic: Annotated[str, typer.Option("--topic", help="Topic the group consumes.")],
    to: Annotated[ResetTo, typer.Option("--to", case_sensitive=False, help="Where to move the group.")],
    at: Annotated[
        str | None, typer.Option("--time", help="With --to time: ISO-8601, e.g. 2026-01-31T12:00:00Z.")
    ] = None,
    tenant: Tenant = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Reset GROUP's committed offsets on TOPIC; prints the new offset of every queue.

    \b
    Examples:
      mqctl offset reset --group billing --topic orders --to beginning
      mqctl offset reset -g billing --topic orders --to time --time 2026-01-31T12:00:00Z
    """
    if (to is ResetTo.TIME) != (at is not None):
        raise CliError("--time goes with --to time (and --to time needs --time)", ExitCode.USAGE)
    body: dict[str, str] = {"topic": topic, "to": to.value}
    if at is not None:
        try:
            when = datetime.fromisoformat(at)
        except ValueError as exc:
            raise CliError(f"--time: not an ISO-8601 time: {at!r}", ExitCode.USAGE) from exc
        if when.tzinfo is None:
            raise CliError("--time needs a time zone, e.g. 2026-01-31T12:00:00Z", ExitCode.USAGE)
        body["time"] = at
    session = current()
    ns = session.tenant(tenant)
    row = find_group(ns, group)
    data = session.api().request(
        "POST", f"consumer-groups/{row['id']}/reset-offset/", json=body, not_found=f"group {ns}/{group}"
    )
    if fmt is output.OutputFormat.TABLE:
        output.emit(data.get("queues", []), fmt, ("broker", "queue_id", "offset"))
    else:
        output.emit(data, fmt)
    output.success(f"group {ns}/{group} reset to {to.value}{f' {at}' if at else ''} on {topic}")
