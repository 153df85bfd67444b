"""``mqctl quota``: a tenant's limits (plan overlaid by overrides); operators set the overrides."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import DEFAULT_WAIT_TIMEOUT, NoWait, Output, Tenant, WaitTimeout
from cli.resources import confirm, finish_change, finish_delete, only_given, tenant_id
from cli.session import current

__all__ = ("LIMITS", "app")

app = typer.Typer(no_args_is_help=True, help="Quotas: list, show (effective limits), set, delete.")

PATH = "quotas/"
# The same names as mqcloud.admin_client.QUOTA_LIMITS and the Plan/Quota fields; repeated here so
# mqctl does not import grpc to build its options.
LIMITS = (
    "produce_messages_per_s",
    "produce_bytes_per_s",
    "consume_messages_per_s",
    "consume_bytes_per_s",
    "storage_bytes",
    "max_topics",
    "max_groups",
    "max_message_bytes",
    "max_connections",
)

TopicOpt = Annotated[str | None, typer.Option("--topic", help="A topic's override instead of the tenant's.")]
GroupOpt = Annotated[str | None, typer.Option("--group", help="A group's override instead of the tenant's.")]


# Typer names each option after its parameter: --produce-messages-per-s, --max-topics, ...
Limit = Annotated[int | None, typer.Option(min=0, show_default=False)]


def _scope_row(ns: str, topic: str | None, group: str | None) -> dict[str, Any] | None:
    """The override row for the tenant, one topic or one group (None when there is none)."""
    if topic and group:
        raise CliError("give --topic or --group, not both", ExitCode.USAGE)
    api = current().api()
    target_id = None
    if topic:
        target_id = api.find("topics/", f"topic {ns}/{topic}", tenant=ns, name=topic)["id"]
    elif group:
        target_id = api.find("consumer-groups/", f"group {ns}/{group}", tenant=ns, name=group)["id"]
    for row in api.list(PATH, tenant=ns):
        if topic and row.get("topic") == target_id:
            return row
        if group and row.get("group") == target_id:
            return row
        if not topic and not group and row.get("scope") == "tenant":
            return row
    return None


def _scope_label(ns: str, topic: str | None, group: str | None) -> str:
    return f"quota of {ns}" + (f" topic {topic}" if topic else "") + (f" group {group}" if group else "")


@app.command("list")
def list_quotas(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List a tenant's quota overrides (empty limits inherit from the plan)."""
    session = current()
    rows = session.api().list(PATH, tenant=session.tenant(tenant), ordering="created")
    output.emit(rows, fmt, ("id", "scope", "topic", "group", *LIMITS, "status"))


@app.command("show")
def show(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """The tenant's effective limits: its plan's, overlaid by its tenant-wide override."""
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    tenant_row = api.tenant(ns)
    if tenant_row.get("plan"):
        plan = api.request("GET", f"plans/{tenant_row['plan']}/", not_found="the tenant's plan")
    else:
        plan = api.find("plans/", "a default plan", is_default="true")
    override = _scope_row(ns, None, None) or {}
    rows = [
        {
            "limit": name,
            "plan": plan.get(name),
            "override": override.get(name),
            "effective": override.get(name) if override.get(name) is not None else plan.get(name),
        }
        for name in LIMITS
    ]
    if fmt is output.OutputFormat.TABLE:
        output.emit(
            rows, fmt, ("limit", "plan", "override", "effective"), title=f"{ns} (plan {plan.get('name')})"
        )
    else:
        output.emit({"tenant": ns, "plan": plan.get("name"), "limits": rows}, fmt)


@app.command("set")
def set_quota(
    tenant: Tenant = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    produce_messages_per_s: Limit = None,
    produce_bytes_per_s: Limit = None,
    consume_messages_per_s: Limit = None,
    consume_bytes_per_s: Limit = None,
    storage_bytes: Limit = None,
    max_topics: Limit = None,
    max_groups: Limit = None,
    max_message_bytes: Limit = None,
    max_connections: Limit = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Set limits of the tenant (or one topic/group) (operators); other limits stay as they are.

    \b
    Examples:
      mqctl quota set --tenant acme --max-topics 50 --produce-messages-per-s 2000
      mqctl quota set --tenant acme --topic orders --produce-bytes-per-s 1048576
    """
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    limits = only_given(
        produce_messages_per_s=produce_messages_per_s,
        produce_bytes_per_s=produce_bytes_per_s,
        consume_messages_per_s=consume_messages_per_s,
        consume_bytes_per_s=consume_bytes_per_s,
        storage_bytes=storage_bytes,
        max_topics=max_topics,
        max_groups=max_groups,
        max_message_bytes=max_message_bytes,
        max_connections=max_connections,
    )
    if not limits:
        raise CliError("no limit given: pass at least one, e.g. --max-topics 10", ExitCode.USAGE)
    row = _scope_row(ns, topic, group)
    if row is None:
        body: dict[str, Any] = {"tenant": tenant_id(api, ns), **limits}
        if topic:
            body["topic"] = api.find("topics/", f"topic {ns}/{topic}", tenant=ns, name=topic)["id"]
        if group:
            body["group"] = api.find("consumer-groups/", f"group {ns}/{group}", tenant=ns, name=group)["id"]
        row = api.post(PATH, body)
    else:
        row = api.patch(f"{PATH}{row['id']}/", limits)
    finish_change(
        api,
        PATH,
        row,
        _scope_label(ns, topic, group),
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
        columns=("id", "scope", *LIMITS, "status"),
    )


@app.command("delete")
def delete(
    tenant: Tenant = None,
    topic: TopicOpt = None,
    group: GroupOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
) -> None:
    """Remove an override (the plan's limits apply again) (operators)."""
    session = current()
    ns = session.tenant(tenant)
    label = _scope_label(ns, topic, group)
    row = _scope_row(ns, topic, group)
    if row is None:
        raise CliError(f"{label} not found (no override is set)", ExitCode.NOT_FOUND)
    confirm(label, yes)
    finish_delete(session.api(), PATH, row, label, no_wait=no_wait, timeout=wait_timeout)
