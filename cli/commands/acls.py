"""``mqctl acl``: RocketMQ ACL 2.0 policies of a tenant (owners and admins manage them)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import DEFAULT_WAIT_TIMEOUT, NoWait, Output, Tenant, WaitTimeout
from cli.resources import confirm, finish_change, finish_delete, only_given, tenant_id
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="ACL policies: list, get, create, update, delete.")

PATH = "acl-policies/"
COLUMNS = (
    "id",
    "principal",
    "resource_type",
    "resource_pattern",
    "resource_name",
    "actions",
    "source_cidrs",
    "decision",
    "status",
)


class ResourceType(StrEnum):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class Pattern(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(StrEnum):
    ALL = "All"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


PolicyId = Annotated[int, typer.Argument(help="Policy id (from mqctl acl list).")]
Principal = Annotated[str | None, typer.Option("--principal", help="An access key id of the tenant, or '*'.")]
RType = Annotated[ResourceType | None, typer.Option("--resource-type", case_sensitive=False)]
RName = Annotated[str | None, typer.Option("--resource", help="Resource name (tenant-relative; '*' = all).")]
RPattern = Annotated[Pattern | None, typer.Option("--pattern", case_sensitive=False, help="Name match.")]
Actions = Annotated[
    list[Action] | None, typer.Option("--action", "-a", case_sensitive=False, help="Repeat for several.")
]
Cidrs = Annotated[
    list[str] | None, typer.Option("--source-cidr", help="Allowed source networks; repeatable.")
]
DecisionOpt = Annotated[Decision | None, typer.Option("--decision", case_sensitive=False)]
Description = Annotated[str | None, typer.Option("--description", help="Free text.")]


def _path_row(tenant: str, policy_id: int) -> dict[str, Any]:
    row: dict[str, Any] = (
        current().api().request("GET", f"{PATH}{policy_id}/", not_found=f"ACL policy {policy_id}")
    )
    if row.get("namespace") != tenant:
        raise CliError(f"ACL policy {policy_id} of {tenant} not found", ExitCode.NOT_FOUND)
    return row


@app.command("list")
def list_acls(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List a tenant's ACL policies."""
    session = current()
    rows = session.api().list(PATH, tenant=session.tenant(tenant), ordering="created")
    output.emit(rows, fmt, COLUMNS)


@app.command("get")
def get(policy_id: PolicyId, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one ACL policy."""
    output.emit(_path_row(current().tenant(tenant), policy_id), fmt)


@app.command("create")
def create(
    tenant: Tenant = None,
    principal: Principal = "*",
    resource_type: RType = ResourceType.TOPIC,
    resource: RName = "*",
    pattern: RPattern = Pattern.LITERAL,
    action: Actions = None,
    source_cidr: Cidrs = None,
    decision: DecisionOpt = Decision.ALLOW,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Create a policy, e.g. --principal AK1 --resource-type Topic --resource orders -a Pub -a Sub.

    \b
    Examples:
      mqctl acl create --principal AK... --resource-type Topic --resource orders -a Pub -a Sub
      mqctl acl create --resource-type Group --resource billing- --pattern PREFIXED -a Sub --decision Deny
    """
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    body = only_given(
        tenant=tenant_id(api, ns),
        principal=principal,
        resource_type=resource_type.value if resource_type else None,
        resource_name="" if resource == "*" else resource,
        resource_pattern=pattern.value if pattern else None,
        actions=[a.value for a in (action or [Action.ALL])],
        source_cidrs=source_cidr or [],
        decision=decision.value if decision else None,
        description=description,
    )
    row = api.post(PATH, body)
    finish_change(
        api,
        PATH,
        row,
        f"ACL policy {row['id']}",
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
        columns=None,
    )


@app.command("update")
def update(
    policy_id: PolicyId,
    tenant: Tenant = None,
    principal: Principal = None,
    resource_type: RType = None,
    resource: RName = None,
    pattern: RPattern = None,
    action: Actions = None,
    source_cidr: Cidrs = None,
    decision: DecisionOpt = None,
    description: Description = None,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change a policy (only the options given; --action / --source-cidr replace the lists)."""
    session = current()
    api = session.api()
    row = _path_row(session.tenant(tenant), policy_id)
    body = only_given(
        principal=principal,
        resource_type=resource_type.value if resource_type else None,
        resource_name=None if resource is None else ("" if resource == "*" else resource),
        resource_pattern=pattern.value if pattern else None,
        actions=[a.value for a in action] if action else None,
        source_cidrs=source_cidr,
        decision=decision.value if decision else None,
        description=description,
    )
    row = api.patch(f"{PATH}{row['id']}/", body)
    finish_change(
        api,
        PATH,
        row,
        f"ACL policy {policy_id}",
        no_wait=no_wait,
        timeout=wait_timeout,
        fmt=fmt,
        columns=None,
    )


@app.command("delete")
def delete(
    policy_id: PolicyId,
    tenant: Tenant = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
) -> None:
    """Delete a policy from the control plane and the brokers."""
    session = current()
    row = _path_row(session.tenant(tenant), policy_id)
    confirm(f"ACL policy {policy_id}", yes)
    finish_delete(session.api(), PATH, row, f"ACL policy {policy_id}", no_wait=no_wait, timeout=wait_timeout)
