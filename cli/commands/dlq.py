"""``mqctl dlq``: a consumer group's dead letters (messages past their delivery attempts)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.commands.groups import find as find_group
from cli.commands.message_lookup import MESSAGE_COLUMNS, preview
from cli.errors import CliError, ExitCode
from cli.options import Output, Tenant
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Dead-letter queues: list, redrive.")

REDRIVE_CHUNK = 32  # ids per request: the bar moves, and one request stays small
GroupOpt = Annotated[str, typer.Option("--group", "-g", help="Consumer group whose dead letters to use.")]


@app.command("list")
def list_dead(
    group: GroupOpt,
    tenant: Tenant = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=256)] = 32,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """List a group's dead letters (oldest first)."""
    session = current()
    ns = session.tenant(tenant)
    row = find_group(ns, group)
    page = session.api().get(f"consumer-groups/{row['id']}/dlq/", limit=limit)
    rows: list[dict[str, Any]] = page.get("results", []) if isinstance(page, dict) else []
    if fmt is output.OutputFormat.TABLE:
        rows = [{**m, "body": preview(m)} for m in rows]
        output.emit(rows, fmt, ("topic", *MESSAGE_COLUMNS))
    else:
        output.emit(rows, fmt)


@app.command("redrive")
def redrive(
    group: GroupOpt,
    message_ids: Annotated[
        list[str] | None, typer.Argument(help="Dead letters to send back (ids from dlq list).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Send every dead letter of the group back.")] = False,
    tenant: Tenant = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Send dead letters back to their original topic for this group, with a progress bar.

    \b
    Examples:
      mqctl dlq redrive --group billing 0102FC... 0102FD...
      mqctl dlq list -g billing -o json | jq -r '.[].message_id' | xargs mqctl dlq redrive -g billing
      mqctl dlq redrive --group billing --all
    """
    if bool(message_ids) == all_:
        raise CliError("give message ids or --all", ExitCode.USAGE)
    session = current()
    ns = session.tenant(tenant)
    row = find_group(ns, group)
    path = f"consumer-groups/{row['id']}/dlq/redrive/"
    api = session.api()
    redriven = 0
    if all_:
        with output.progress(f"redriving every dead letter of {ns}/{group}", total=None):
            redriven = int(api.post(path, {"all": True}).get("redriven", 0))
    else:
        ids = list(dict.fromkeys(message_ids or []))
        with output.progress(f"redriving {len(ids)} dead letter(s) of {ns}/{group}", total=len(ids)) as (
            bar,
            task,
        ):
            for start in range(0, len(ids), REDRIVE_CHUNK):
                chunk = ids[start : start + REDRIVE_CHUNK]
                redriven += int(api.post(path, {"message_ids": chunk}).get("redriven", 0))
                bar.advance(task, len(chunk))
    if fmt is not output.OutputFormat.TABLE:
        output.emit({"group": group, "redriven": redriven}, fmt)
    output.success(f"{redriven} message(s) sent back for {ns}/{group}")
