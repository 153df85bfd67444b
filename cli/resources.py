"""Shared steps of the tenant-owned resource commands (topic, group, key, acl, quota).

Resources are addressed the way people think of them (tenant namespace + name); the API wants ids,
so each command looks the row up first. Provisioned changes wait for the brokers unless --no-wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from cli import output
from cli.errors import CliError, ExitCode
from cli.session import current
from cli.waiting import wait_active, wait_gone

if TYPE_CHECKING:
    from cli.api import ApiClient

__all__ = ("NamedResource", "confirm", "finish_change", "finish_delete", "only_given", "tenant_id")


def tenant_id(api: ApiClient, namespace: str) -> int:
    return int(api.tenant(namespace)["id"])


def only_given(**fields: Any) -> dict[str, Any]:
    """The fields a user actually passed (None means "leave as is")."""
    return {k: v for k, v in fields.items() if v is not None}


def confirm(what: str, yes: bool) -> None:
    """Ask before deleting, unless --yes; refuse without a terminal to ask on."""
    if yes:
        return
    import sys

    if not sys.stdin.isatty():
        raise CliError(f"refusing to delete {what} without --yes (no terminal to ask on)", ExitCode.USAGE)
    if not typer.confirm(f"Delete {what}?", default=False, err=True):
        raise CliError("not deleted", ExitCode.ERROR)


def finish_change(
    api: ApiClient,
    path: str,
    row: dict[str, Any],
    what: str,
    *,
    no_wait: bool,
    timeout: float,
    fmt: output.OutputFormat,
    columns: Sequence[str] | None,
) -> dict[str, Any]:
    """After a create/update: wait until active (unless --no-wait), then print the row."""
    if not no_wait:
        row = wait_active(api, f"{path}{row['id']}/", row, what, timeout)
    output.emit(row, fmt, columns)
    output.success(f"{what} is {row.get('status')}")
    return row


def finish_delete(
    api: ApiClient, path: str, row: dict[str, Any], what: str, *, no_wait: bool, timeout: float
) -> None:
    """DELETE the row; wait until the brokers confirm (the row is gone) unless --no-wait."""
    detail = f"{path}{row['id']}/"
    api.request("DELETE", detail, not_found=what)
    if no_wait:
        output.success(f"{what} is being deleted")
        return
    wait_gone(api, detail, what, timeout)
    output.success(f"{what} deleted")


@dataclass(frozen=True)
class NamedResource:
    """A kind of provisioned resource a tenant names (topic, group): where the API keeps it (``path``),
    what people call it (``noun``), and the columns a change prints. The steps every such command
    shares, from the tenant and name a user typed to the row the brokers serve."""

    path: str
    noun: str
    columns: Sequence[str]

    def label(self, tenant: str, name: str) -> str:
        return f"{self.noun} {tenant}/{name}"

    def find(self, tenant: str, name: str) -> dict[str, Any]:
        """The row for ``tenant``/``name`` (exit 3 when there is none)."""
        return current().api().find(self.path, self.label(tenant, name), tenant=tenant, name=name)

    def save(
        self,
        tenant: str | None,
        name: str,
        fields: dict[str, Any],
        *,
        create: bool,
        no_wait: bool,
        timeout: float,
        fmt: output.OutputFormat,
    ) -> dict[str, Any]:
        """POST a new row (``create``) or PATCH the named one with the ``fields`` given (None: the
        server's default, or leave as is), wait until the brokers serve it, print it."""
        session = current()
        ns = session.tenant(tenant)
        api = session.api()
        if create:
            row = api.post(self.path, only_given(tenant=tenant_id(api, ns), name=name, **fields))
        else:
            row = api.patch(f"{self.path}{self.find(ns, name)['id']}/", only_given(**fields))
        label = self.label(ns, name)
        return finish_change(
            api, self.path, row, label, no_wait=no_wait, timeout=timeout, fmt=fmt, columns=self.columns
        )

    def delete(self, tenant: str | None, name: str, *, yes: bool, no_wait: bool, timeout: float) -> None:
        """Ask (unless ``yes``), DELETE, wait until the brokers dropped it (unless ``no_wait``)."""
        session = current()
        ns = session.tenant(tenant)
        row = self.find(ns, name)
        label = self.label(ns, name)
        confirm(label, yes)
        finish_delete(session.api(), self.path, row, label, no_wait=no_wait, timeout=timeout)
