"""``mqctl key``: a tenant's access keys (the SDK signs with them). The secret is shown once."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.contexts import Credentials
from cli.options import DEFAULT_WAIT_TIMEOUT, NoWait, Output, Tenant, WaitTimeout
from cli.resources import confirm, finish_delete, tenant_id
from cli.session import current
from cli.waiting import wait_active

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Access keys: list, get, create, rotate, revoke, delete.")

PATH = "access-keys/"
COLUMNS = ("access_key", "description", "key_status", "expires_at", "status", "created")
SECRET_COLUMNS = (
    "access_key",
    "secret_key",
    "namespace",
    "description",
    "key_status",
    "expires_at",
    "status",
)

AccessKeyArg = Annotated[str, typer.Argument(help="The access key id (AK...).")]
Save = Annotated[
    bool,
    typer.Option("--save", help="Keep the key and secret in the current context for the message commands."),
]


def find(tenant: str, access_key: str) -> dict[str, Any]:
    return current().api().find(PATH, f"access key {access_key}", tenant=tenant, access_key=access_key)


def _with_secret(
    row: dict[str, Any], ns: str, *, save: bool, no_wait: bool, timeout: float, fmt: output.OutputFormat
) -> None:
    """Print a freshly issued key (its secret is in this answer only) and optionally save it."""
    secret = str(row.get("secret_key", ""))
    session = current()
    if save:
        ctx = session.context()
        if ctx is None:
            output.warn("not saved: there is no current context (run mqctl login)")
        else:
            ctx.credentials[ns] = Credentials(str(row["access_key"]), secret)
            session.store().save()
            output.info(f"saved access key {row['access_key']} for tenant {ns} in the context")
    try:
        if not no_wait:
            what = f"access key {row['access_key']}"
            row = dict(wait_active(session.api(), f"{PATH}{row['id']}/", row, what, timeout))
    finally:
        # Printed even when waiting fails: the secret is in this answer only.
        # "secret" is the short name scripts look for; "secret_key" is the API's own field name.
        output.emit({**row, "secret_key": secret, "secret": secret}, fmt, SECRET_COLUMNS)
    output.warn("the secret is shown only now; keep it somewhere safe")


@app.command("list")
def list_keys(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List a tenant's access keys (never their secrets)."""
    session = current()
    rows = session.api().list(PATH, tenant=session.tenant(tenant), ordering="created")
    output.emit(rows, fmt, COLUMNS)


@app.command("get")
def get(access_key: AccessKeyArg, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one access key."""
    output.emit(find(current().tenant(tenant), access_key), fmt)


@app.command("create")
def create(
    tenant: Tenant = None,
    description: Annotated[str, typer.Option("--description", help="What the key is for.")] = "",
    save: Save = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Issue an access key; prints access_key and secret (once) and waits until brokers accept it.

    \b
    Examples:
      mqctl key create --tenant acme --save
      mqctl key create --tenant acme -o json | jq -r .secret
    """
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    row = api.post(PATH, {"tenant": tenant_id(api, ns), "description": description})
    _with_secret(row, ns, save=save, no_wait=no_wait, timeout=wait_timeout, fmt=fmt)


@app.command("rotate")
def rotate(
    access_key: AccessKeyArg,
    tenant: Tenant = None,
    overlap_seconds: Annotated[
        int | None, typer.Option("--overlap-seconds", min=0, help="How long the old key keeps working.")
    ] = None,
    save: Save = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Issue a successor key; the old one keeps working for the overlap, then expires.

    \b
    Examples:
      mqctl key rotate AK... --overlap-seconds 3600 --save
    """
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, access_key)
    body = {} if overlap_seconds is None else {"overlap_seconds": overlap_seconds}
    new = session.api().post(f"{PATH}{row['id']}/rotate/", body)
    _with_secret(new, ns, save=save, no_wait=no_wait, timeout=wait_timeout, fmt=fmt)


@app.command("revoke")
def revoke(access_key: AccessKeyArg, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Stop a key at once (brokers refuse it as soon as they hear of it)."""
    session = current()
    row = find(session.tenant(tenant), access_key)
    output.emit(session.api().post(f"{PATH}{row['id']}/revoke/"), fmt, COLUMNS)
    output.success(f"access key {access_key} revoked")


@app.command("delete")
def delete(
    access_key: AccessKeyArg,
    tenant: Tenant = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    no_wait: NoWait = False,
    wait_timeout: WaitTimeout = DEFAULT_WAIT_TIMEOUT,
) -> None:
    """Delete a key from the control plane and the brokers."""
    session = current()
    row = find(session.tenant(tenant), access_key)
    confirm(f"access key {access_key}", yes)
    finish_delete(session.api(), PATH, row, f"access key {access_key}", no_wait=no_wait, timeout=wait_timeout)
