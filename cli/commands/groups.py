"""``mqctl group``: a tenant's consumer groups through the control plane."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from cli import output
from cli.options import DEFAULT_WAIT_TIMEOUT, NoWait, Output, Tenant, WaitTimeout
from cli.resources import NamedResource
from cli.session import current

__all__ = ("app", "find")

app = typer.Typer(
    no_args_is_help=True, help="Consumer groups: list, get, create, update, delete, lag, clients."
)

PATH = "consumer-groups/"
COLUMNS = ("name", "fifo", "broadcast", "max_delivery_attempts", "retry_policy", "status")
DETAIL_COLUMNS = (
    "id",
    "namespace",
    "name",
    "qualified_name",
    "description",
    "fifo",
    "broadcast",
    "max_delivery_attempts",
    "retry_policy",
    "retry_initial_backoff_ms",
    "retry_max_backoff_ms",
    "status",
    "status_message",
    "created",
    "updated",
)


class RetryPolicy(StrEnum):
    EXPONENTIAL = "EXPONENTIAL"
    CUSTOMIZED = "CUSTOMIZED"


Name = Annotated[str, typer.Argument(help="Consumer group name (tenant-relative).")]
MaxAttempts = Annotated[
    int | None, typer.Option("--max-delivery-attempts", min=1, help="Deliveries before the DLQ.")
]
Policy = Annotated[RetryPolicy | None, typer.Option("--retry-policy", case_sensitive=False)]
InitialBackoff = Annotated[int | None, typer.Option("--retry-initial-backoff-ms", min=0)]
MaxBackoff = Annotated[int | None, typer.Option("--retry-max-backoff-ms", min=0)]
Description = Annotated[str | None, typer.Option("--description", help="Free text.")]


GROUPS = NamedResource(PATH, "group", DETAIL_COLUMNS)
find = GROUPS.find


# Arguments of create and update that are not the group's: every other one is a field, named as
# the API names it.
_NOT_FIELDS = frozenset({"name", "tenant", "no_wait", "wait_timeout", "fmt"})


def _fields(arguments: dict[str, Any]) -> dict[str, Any]:
    """A group's fields among a command's ``arguments`` (its ``locals()``), as the API takes them;
    None: not given."""
    fields = {key: value for key, value in arguments.items() if key not in _NOT_FIELDS}
    policy = fields["retry_policy"]
    fields["retry_policy"] = policy.value if policy else None
    return fields


@app.command("list")
def list_groups(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List a tenant's consumer groups."""
    session = current()
    rows = session.api().list(PATH, tenant=session.tenant(tenant), ordering="name")
    output.emit(rows, fmt, COLUMNS)


@app.command("get")
def get(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one consumer group."""
    output.emit(find(current().tenant(tenant), name), fmt, DETAIL_COLUMNS)


@app.command("create")
def create(
    name: Name,
    tenant: Tenant = None,
    fifo: Annotated[bool, typer.Option("--fifo", help="Deliver FIFO topics' messages in order.")] = False,
    broadcast: Annotated[
        bool, typer.Option("--broadcast", help="Every consumer gets every message.")
    ] = False,
    max_delivery_attempts: MaxAttempts = None,
    retry_policy: Policy = None,
    retry_initial_backoff_ms: InitialBackoff = None,
    retry_max_backoff_ms: MaxBackoff = None,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Create a consumer group and wait until the brokers serve it (unless --no-wait).

    \b
    Examples:
      mqctl group create billing --tenant acme --fifo
      mqctl group create audit --max-delivery-attempts 5 --retry-policy EXPONENTIAL
    """
    GROUPS.save(
        tenant,
        name,
        _fields(locals()),
        create=True,
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
    )


@app.command("update")
def update(
    name: Name,
    tenant: Tenant = None,
    fifo: Annotated[bool | None, typer.Option("--fifo/--no-fifo", show_default=False)] = None,
    broadcast: Annotated[bool | None, typer.Option("--broadcast/--no-broadcast", show_default=False)] = None,
    max_delivery_attempts: MaxAttempts = None,
    retry_policy: Policy = None,
    retry_initial_backoff_ms: InitialBackoff = None,
    retry_max_backoff_ms: MaxBackoff = None,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change a consumer group (only the options given)."""
    GROUPS.save(
        tenant,
        name,
        _fields(locals()),
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
    """Delete a consumer group from the brokers."""
    GROUPS.delete(tenant, name, yes=yes, no_wait=no_wait, timeout=wait_timeout)


@app.command("lag")
def lag(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Committed offset, lag (messages and ms) and in-flight count per queue, from the brokers."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    data = session.api().request("GET", f"{PATH}{row['id']}/lag/", not_found=GROUPS.label(ns, name))
    if fmt is output.OutputFormat.TABLE:
        output.emit(
            data.get("queues", []),
            fmt,
            ("topic", "broker", "queue_id", "committed_offset", "max_offset", "lag", "inflight", "lag_ms"),
            title=f"{ns}/{name}: total lag {data.get('total_lag', 0)}",
        )
    else:
        output.emit(data, fmt)


@app.command("clients")
def clients(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Consumers of this group connected to the brokers."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    data = session.api().request("GET", f"{PATH}{row['id']}/clients/", not_found=GROUPS.label(ns, name))
    output.emit(
        data.get("results", []), fmt, ("client_id", "language", "version", "address", "broker", "last_seen")
    )
