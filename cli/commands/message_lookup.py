"""``mqctl message get|query|trace``: look messages up through the control plane, which reads the brokers.

The REST contract is docs/control-plane.md ("Data-plane views"); bodies come as base64.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import Output, Tenant
from cli.session import current

__all__ = ("MESSAGE_COLUMNS", "get", "preview", "query", "topic_path", "trace")

Topic = Annotated[str, typer.Argument(help="Topic name (tenant-relative).")]
MessageId = Annotated[str, typer.Argument(help="Message id (as printed by send).")]


def topic_path(ns: str, topic: str) -> str:
    row = current().api().find("topics/", f"topic {ns}/{topic}", tenant=ns, name=topic)
    return f"topics/{row['id']}/"


def preview(message: dict[str, Any], width: int = 60) -> str:
    raw = base64.b64decode(message.get("body_base64") or "")
    try:
        text = raw.decode("utf-8").replace("\n", "\\n")
    except UnicodeDecodeError:
        return f"<{len(raw)} bytes>"
    return text if len(text) <= width else text[:width] + "..."


MESSAGE_COLUMNS = ("message_id", "queue_id", "queue_offset", "tag", "keys", "store_time", "body_size", "body")


def _show_messages(rows: list[dict[str, Any]], fmt: output.OutputFormat) -> None:
    if fmt is output.OutputFormat.TABLE:
        rows = [{**m, "body": preview(m)} for m in rows]
    output.emit(rows, fmt, MESSAGE_COLUMNS)


def get(
    topic: Topic,
    message_id: MessageId,
    tenant: Tenant = None,
    body_only: Annotated[
        bool, typer.Option("--body-only", help="Write only the raw body to stdout.")
    ] = False,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Look a message up by id."""
    ns = current().tenant(tenant)
    path = topic_path(ns, topic)
    page = current().api().get(f"{path}messages/", message_id=message_id)
    rows = page.get("results", []) if isinstance(page, dict) else []
    if not rows:
        raise CliError(f"message {message_id} not found in {ns}/{topic}", ExitCode.NOT_FOUND)
    message = rows[0]
    if body_only:
        output.write_bytes(base64.b64decode(message.get("body_base64") or ""))
        return
    if fmt is output.OutputFormat.TABLE:
        message = {**message, "body": preview(message, 2000)}
    output.emit(message, fmt)


def query(
    topic: Topic,
    tenant: Tenant = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Messages with this key.")] = None,
    begin: Annotated[str | None, typer.Option("--begin", help="Stored at or after (ISO-8601).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Stored before (ISO-8601).")] = None,
    queue_id: Annotated[
        int | None, typer.Option("--queue-id", min=0, help="Read one queue (from --offset).")
    ] = None,
    offset: Annotated[
        int | None, typer.Option("--offset", min=0, help="With --queue-id: first offset (0).")
    ] = None,
    broker: Annotated[
        str | None, typer.Option("--broker", help="With --queue-id: which broker group's queue.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=256)] = 32,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Find messages by key, by store time range, or by queue and offset.

    \b
    Examples:
      mqctl message query orders --key order-1
      mqctl message query orders --begin 2026-01-31T00:00:00Z --end 2026-01-31T01:00:00Z
      mqctl message query orders --queue-id 0 --offset 100 --limit 10
    """
    modes = (key is not None, begin is not None or end is not None, queue_id is not None)
    if sum(modes) != 1:
        raise CliError("give one of --key, --begin/--end, or --queue-id [--offset]", ExitCode.USAGE)
    if offset is not None and queue_id is None:
        raise CliError("--offset goes with --queue-id", ExitCode.USAGE)
    session = current()
    ns = session.tenant(tenant)
    page = session.api().get(
        f"{topic_path(ns, topic)}messages/",
        key=key,
        begin=begin,
        end=end,
        queue_id=queue_id,
        offset=offset,
        broker=broker,
        limit=limit,
    )
    _show_messages(page.get("results", []) if isinstance(page, dict) else [], fmt)


def trace(
    topic: Topic, message_id: MessageId, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE
) -> None:
    """A message's life: stored, delivered, acked, retried, dead-lettered, redriven."""
    ns = current().tenant(tenant)
    path = topic_path(ns, topic)
    data = (
        current()
        .api()
        .request(
            "GET", f"{path}messages/{message_id}/trace/", not_found=f"message {message_id} in {ns}/{topic}"
        )
    )
    if fmt is output.OutputFormat.TABLE:
        output.emit(
            data.get("events", []),
            fmt,
            ("time", "event", "group", "attempt", "client_id", "detail"),
            title=f"trace of {message_id}",
        )
    else:
        output.emit(data, fmt)
