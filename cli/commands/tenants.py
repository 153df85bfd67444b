"""``mqctl tenant``: tenants (operators create and delete them), their members and audit trail."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.options import Output
from cli.resources import confirm, only_given
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Tenants: list, get, create, update, delete, members, audit.")
member_app = typer.Typer(no_args_is_help=True, help="A tenant's members and their roles.")
app.add_typer(member_app, name="member")

PATH = "tenants/"
COLUMNS = ("namespace", "name", "plan", "cluster", "status", "created")


class TenantStatus(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    DEVELOPER = "developer"
    VIEWER = "viewer"


Namespace = Annotated[str, typer.Argument(help="Tenant namespace (its unique slug).")]
Plan = Annotated[str | None, typer.Option("--plan", help="Plan name (operators).")]
Cluster = Annotated[str | None, typer.Option("--cluster", help="Broker cluster name (operators).")]


def _plan_id(name: str | None) -> int | None:
    if name is None:
        return None
    return int(current().api().find("plans/", f"plan {name!r}", name=name)["id"])


def _cluster_id(name: str | None) -> int | None:
    if name is None:
        return None
    return int(current().api().find("broker-clusters/", f"cluster {name!r}", name=name)["id"])


@app.command("list")
def list_tenants(fmt: Output = output.OutputFormat.TABLE) -> None:
    """List the tenants you can see (operators: all)."""
    output.emit(current().api().list(PATH, ordering="namespace"), fmt, COLUMNS)


@app.command("get")
def get(namespace: Namespace, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one tenant."""
    output.emit(current().api().tenant(namespace), fmt)


@app.command("create")
def create(
    namespace: Namespace,
    name: Annotated[str | None, typer.Option("--name", help="Display name (default: the namespace).")] = None,
    plan: Plan = None,
    cluster: Cluster = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Username of the first owner.")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Create a tenant (operators only).

    \b
    Examples:
      mqctl tenant create acme --name 'Acme Inc' --plan standard --owner alice
    """
    body = only_given(
        namespace=namespace,
        name=name or namespace,
        plan=_plan_id(plan),
        cluster=_cluster_id(cluster),
        owner=owner,
    )
    row = current().api().post(PATH, body)
    output.emit(row, fmt)
    output.success(f"tenant {namespace} created")


@app.command("update")
def update(
    namespace: Namespace,
    name: Annotated[str | None, typer.Option("--name", help="New display name.")] = None,
    plan: Plan = None,
    cluster: Cluster = None,
    status: Annotated[TenantStatus | None, typer.Option("--status", help="Suspend or reactivate.")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Rename a tenant (owners, admins) or change its plan, cluster, status (operators)."""
    api = current().api()
    row = api.tenant(namespace)
    body = only_given(
        name=name, plan=_plan_id(plan), cluster=_cluster_id(cluster), status=status.value if status else None
    )
    if not body:
        raise CliError("nothing to change: give --name, --plan, --cluster or --status", ExitCode.USAGE)
    output.emit(api.patch(f"{PATH}{row['id']}/", body), fmt)
    output.success(f"tenant {namespace} updated")


@app.command("delete")
def delete(
    namespace: Namespace,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a tenant (operators; refused while it still owns topics, groups or keys)."""
    api = current().api()
    row = api.tenant(namespace)
    confirm(f"tenant {namespace}", yes)
    api.request("DELETE", f"{PATH}{row['id']}/", not_found=f"tenant {namespace!r}")
    output.success(f"tenant {namespace} deleted")


@app.command("audit")
def audit(
    namespace: Namespace,
    since: Annotated[
        str | None, typer.Option("--since", help="ISO-8601 time, e.g. 2026-01-31T00:00:00Z.")
    ] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="create, update, delete, rotate, revoke.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most recent N events.")] = 50,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """The tenant's audit trail, newest first."""
    api = current().api()
    page = api.get(
        "audit-events/", tenant=namespace, since=since, action=action, ordering="-created", limit=limit
    )
    rows: list[dict[str, Any]] = page.get("results", []) if isinstance(page, dict) else page
    output.emit(rows, fmt, ("created", "actor_name", "action", "object_type", "object_repr", "source_ip"))


@member_app.command("list")
def member_list(namespace: Namespace, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Members of a tenant and their roles."""
    rows = current().api().list("memberships/", tenant=namespace, ordering="created")
    output.emit(rows, fmt, ("user", "role", "created"))


@member_app.command("add")
def member_add(
    namespace: Namespace,
    user: Annotated[str, typer.Argument(help="Username.")],
    role: Annotated[Role, typer.Option("--role", case_sensitive=False)] = Role.VIEWER,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Give a user a role in the tenant (owners and admins; only owners grant owner).

    \b
    Examples:
      mqctl tenant member add acme bob --role developer
    """
    api = current().api()
    tenant = api.tenant(namespace)
    row = api.post("memberships/", {"tenant": tenant["id"], "user": user, "role": role.value})
    output.emit(row, fmt, ("user", "role", "created"))
    output.success(f"{user} is {role.value} of {namespace}")


@member_app.command("remove")
def member_remove(namespace: Namespace, user: Annotated[str, typer.Argument(help="Username.")]) -> None:
    """Take a user out of the tenant (a tenant keeps at least one owner)."""
    api = current().api()
    row = api.find("memberships/", f"member {user!r} of {namespace}", tenant=namespace, user=user)
    api.request("DELETE", f"memberships/{row['id']}/")
    output.success(f"{user} removed from {namespace}")
