"""``mqctl topic``: a tenant's topics through the control plane (created on every broker of its cluster)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from cli import output
from cli.options import DEFAULT_WAIT_TIMEOUT, NoWait, Output, Tenant, WaitTimeout
from cli.resources import NamedResource
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Topics: list, get, create, update, delete, stats, producers.")

PATH = "topics/"
COLUMNS = ("name", "message_type", "queue_count", "retention_hours", "max_message_bytes", "status")
DETAIL_COLUMNS = (
    "id",
    "namespace",
    "name",
    "qualified_name",
    "description",
    "message_type",
    "queue_count",
    "retention_hours",
    "tiered_retention_hours",
    "max_message_bytes",
    "placements",
    "status",
    "status_message",
    "created",
    "updated",
)


class TopicType(StrEnum):
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


Name = Annotated[str, typer.Argument(help="Topic name (tenant-relative, e.g. orders).")]
Queues = Annotated[int | None, typer.Option("--queues", "-q", min=1, help="Number of queues.")]
RetentionHours = Annotated[
    int | None, typer.Option("--retention-hours", min=1, help="Hours messages stay on broker disks.")
]
TieredHours = Annotated[
    int | None, typer.Option("--tiered-retention-hours", min=0, help="Hours in the object store after that.")
]
MaxBytes = Annotated[int | None, typer.Option("--max-message-bytes", min=1, help="Largest message body.")]
Description = Annotated[str | None, typer.Option("--description", help="Free text.")]


TOPICS = NamedResource(PATH, "topic", DETAIL_COLUMNS)
find = TOPICS.find


@app.command("list")
def list_topics(
    tenant: Tenant = None,
    message_type: Annotated[TopicType | None, typer.Option("--type", help="Only this type.")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """List a tenant's topics.

    \b
    Examples:
      mqctl topic list --tenant acme
      mqctl topic list -o json | jq -r '.[].name'
    """
    session = current()
    ns = session.tenant(tenant)
    rows = session.api().list(
        PATH, tenant=ns, message_type=message_type.value if message_type else None, ordering="name"
    )
    output.emit(rows, fmt, COLUMNS)


@app.command("get")
def get(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one topic, with its placement over broker groups and provisioning status."""
    ns = current().tenant(tenant)
    output.emit(find(ns, name), fmt, DETAIL_COLUMNS)


@app.command("create")
def create(
    name: Name,
    tenant: Tenant = None,
    message_type: Annotated[
        TopicType, typer.Option("--type", case_sensitive=False, help="Message type the topic accepts.")
    ] = TopicType.NORMAL,
    queues: Queues = None,
    retention_hours: RetentionHours = None,
    tiered_retention_hours: TieredHours = None,
    max_message_bytes: MaxBytes = None,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Create a topic and wait until the brokers serve it (unless --no-wait).

    \b
    Examples:
      mqctl topic create orders --tenant acme --type FIFO --queues 8
      mqctl topic create events --retention-hours 24 --no-wait -o json
    """
    TOPICS.save(
        tenant,
        name,
        {
            "message_type": message_type.value,
            "queue_count": queues,
            "retention_hours": retention_hours,
            "tiered_retention_hours": tiered_retention_hours,
            "max_message_bytes": max_message_bytes,
            "description": description,
        },
        create=True,
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
    )


@app.command("update")
def update(
    name: Name,
    tenant: Tenant = None,
    message_type: Annotated[
        TopicType | None, typer.Option("--type", case_sensitive=False, help="New message type.")
    ] = None,
    queues: Queues = None,
    retention_hours: RetentionHours = None,
    tiered_retention_hours: TieredHours = None,
    max_message_bytes: MaxBytes = None,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change a topic (only the options given) and wait until the brokers have it."""
    TOPICS.save(
        tenant,
        name,
        {
            "message_type": message_type.value if message_type else None,
            "queue_count": queues,
            "retention_hours": retention_hours,
            "tiered_retention_hours": tiered_retention_hours,
            "max_message_bytes": max_message_bytes,
            "description": description,
        },
        create=False,
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
    )


@app.command("delete")
def delete(
    name: Name,
    tenant: Tenant = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
) -> None:
    """Delete a topic from the brokers (stored messages age out by retention)."""
    TOPICS.delete(tenant, name, yes=yes, no_wait=no_wait, timeout=wait_timeout)


@app.command("stats")
def stats(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Per-queue offsets and last store time, read from the brokers."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    data = session.api().request("GET", f"{PATH}{row['id']}/stats/", not_found=TOPICS.label(ns, name))
    if fmt is output.OutputFormat.TABLE:
        output.emit(
            data.get("queues", []),
            fmt,
            ("broker", "queue_id", "min_offset", "max_offset", "last_store_time"),
            title=f"{ns}/{name}: {data.get('messages_total', 0)} messages",
        )
    else:
        output.emit(data, fmt)


@app.command("producers")
def producers(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Producers connected to the brokers for this topic."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    data = session.api().request("GET", f"{PATH}{row['id']}/producers/", not_found=TOPICS.label(ns, name))
    output.emit(
        data.get("results", []), fmt, ("client_id", "language", "version", "address", "broker", "last_seen")
    )
