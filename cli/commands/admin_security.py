"""``mqctl admin key|acl|quota``: access keys, ACL policies and quotas held by one broker.

The control plane pushes these; operators use the commands to inspect a broker or repair it by
hand. Key secrets are never printed.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any

import typer

from cli.commands.admin import _client, _dicts, _show

__all__ = ("acl_app", "key_app", "quota_app")

key_app = typer.Typer(no_args_is_help=True, help="Access keys on the broker: put, delete, list.")
acl_app = typer.Typer(no_args_is_help=True, help="ACL policies on the broker: put, delete, list.")
quota_app = typer.Typer(no_args_is_help=True, help="Quotas on the broker: put, delete, list.")

KEY_COLUMNS = ("access_key", "namespace", "status", "expires_at_ms", "update_time_ms")
ACL_COLUMNS = (
    "namespace",
    "name",
    "principal",
    "decision",
    "resource_type",
    "resource_pattern",
    "pattern_type",
    "actions",
    "source_cidrs",
)
Namespace = Annotated[str, typer.Option("--namespace", help="Tenant namespace")]


def _without_secrets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "secret_key"} for row in rows]


@key_app.command("put")
def key_put(
    access_key: Annotated[str, typer.Argument(help="Access key id")],
    namespace: Namespace,
    secret: Annotated[
        str,
        typer.Option(
            "--secret", envvar="MQCTL_KEY_SECRET", help="Secret [MQCTL_KEY_SECRET]; generated if empty"
        ),
    ] = "",
    expires_in_s: Annotated[int, typer.Option("--expires-in", help="Seconds until it expires; 0: never")] = 0,
    revoked: Annotated[bool, typer.Option("--revoked", help="Store it revoked")] = False,
) -> None:
    """Create or replace an access key; a generated secret is printed once, to stdout."""
    generated = not secret
    secret = secret or secrets.token_urlsafe(30)
    expires = int(time.time() * 1000) + expires_in_s * 1000 if expires_in_s > 0 else 0
    with _client() as c:
        key = c.put_access_key(
            access_key,
            secret_key=secret,
            namespace=namespace,
            status="REVOKED" if revoked else "ACTIVE",
            expires_at_ms=expires,
        )
    _show(_without_secrets(_dicts([key])), KEY_COLUMNS)
    if generated:
        typer.echo(secret)


@key_app.command("delete")
def key_delete(access_key: Annotated[str, typer.Argument()], namespace: Namespace = "") -> None:
    """Delete an access key."""
    with _client() as c:
        c.delete_access_key(access_key, namespace)
    typer.echo(f"deleted access key {access_key}", err=True)


@key_app.command("list")
def key_list(namespace: Namespace = "") -> None:
    """Access keys (never their secrets)."""
    with _client() as c:
        _show(_without_secrets(_dicts(c.list_access_keys(namespace))), KEY_COLUMNS)


@acl_app.command("put")
def acl_put(
    name: Annotated[str, typer.Argument(help="Policy name, unique in the namespace")],
    namespace: Namespace,
    resource_type: Annotated[str, typer.Option("--resource-type", help="Any|Cluster|Namespace|Topic|Group")],
    actions: Annotated[list[str], typer.Option("--action", help="Pub|Sub|Create|Update|Delete|Get|List|All")],
    principal: Annotated[str, typer.Option("--principal", help="Access key id or *")] = "*",
    resource: Annotated[
        str, typer.Option("--resource", help="Tenant-relative name or prefix; empty: all")
    ] = "",
    prefixed: Annotated[
        bool, typer.Option("--prefixed", help="Match names starting with --resource")
    ] = False,
    cidrs: Annotated[
        list[str] | None, typer.Option("--cidr", help="Allowed source CIDR (repeatable)")
    ] = None,
    deny: Annotated[bool, typer.Option("--deny", help="A deny policy (deny wins over allow)")] = False,
) -> None:
    """Create or replace an ACL policy."""
    with _client() as c:
        policy = c.put_acl(
            name,
            namespace=namespace,
            principal=principal,
            resource_type=resource_type,
            actions=actions,
            resource_pattern=resource,
            pattern_type="PREFIXED" if prefixed else "LITERAL",
            source_cidrs=cidrs or (),
            decision="DENY" if deny else "ALLOW",
        )
    _show(_dicts([policy]), ACL_COLUMNS)


@acl_app.command("delete")
def acl_delete(name: Annotated[str, typer.Argument()], namespace: Namespace) -> None:
    """Delete an ACL policy."""
    with _client() as c:
        c.delete_acl(namespace, name)
    typer.echo(f"deleted ACL policy {namespace}/{name}", err=True)


@acl_app.command("list")
def acl_list(namespace: Namespace = "") -> None:
    """ACL policies."""
    with _client() as c:
        _show(_dicts(c.list_acls(namespace)), ACL_COLUMNS)


def _parse_limits(values: list[str]) -> dict[str, int]:
    from mqcloud.admin_client import QUOTA_LIMITS

    limits: dict[str, int] = {}
    for item in values:
        name, sep, number = item.partition("=")
        if not sep or name not in QUOTA_LIMITS or not number.strip().isdigit():
            raise typer.BadParameter(
                f"expected LIMIT=N with LIMIT one of {', '.join(QUOTA_LIMITS)}; got {item!r}"
            )
        limits[name] = int(number)
    return limits


@quota_app.command("put")
def quota_put(
    namespace: Namespace,
    limits: Annotated[list[str], typer.Argument(help="LIMIT=N, e.g. produce_messages_per_s=1000")],
    topic: Annotated[str, typer.Option("--topic", help="Override for one topic")] = "",
    group: Annotated[str, typer.Option("--group", help="Override for one group")] = "",
) -> None:
    """Replace the quota of a namespace, or of one of its topics or groups."""
    parsed = _parse_limits(limits)
    with _client() as c:
        quota = c.put_quota(namespace, parsed, topic=topic, group=group)
    _show(_dicts([quota]), ("namespace", "topic", "group", *parsed))


@quota_app.command("delete")
def quota_delete(
    namespace: Namespace,
    topic: Annotated[str, typer.Option("--topic")] = "",
    group: Annotated[str, typer.Option("--group")] = "",
) -> None:
    """Delete a quota."""
    with _client() as c:
        c.delete_quota(namespace, topic=topic, group=group)
    typer.echo("deleted quota", err=True)


@quota_app.command("list")
def quota_list(namespace: Namespace = "") -> None:
    """Quotas and their limits."""
    from mqcloud.admin_client import QUOTA_LIMITS, quota_limits

    with _client() as c:
        rows = [
            {"namespace": q.namespace, "topic": q.topic, "group": q.group, **quota_limits(q)}
            for q in c.list_quotas(namespace)
        ]
    _show(rows, ("namespace", "topic", "group", *QUOTA_LIMITS))
