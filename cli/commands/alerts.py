"""``mqctl alert-rule`` and ``mqctl alert-event``: lag and dead-letter alerts on consumer groups.

The same rules as the console's alert pages and ``/api/v1/alert-rules/``: a rule watches one group
for lag (messages) or dead letters and notifies by e-mail or a signed webhook. Rules live in the
control plane only (nothing to wait for on the brokers).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.commands import groups
from cli.errors import CliError, ExitCode
from cli.options import Output, Tenant
from cli.resources import NamedResource, confirm, only_given, tenant_id
from cli.session import current

__all__ = ("events_app", "rules_app")

rules_app = typer.Typer(
    no_args_is_help=True,
    help="Alert rules: list, get, create, update, delete, secret, rotate-secret.",
)
events_app = typer.Typer(no_args_is_help=True, help="Alerts that fired: list.")

PATH = "alert-rules/"
EVENTS = "alert-events/"
COLUMNS = ("name", "group_name", "lag_threshold", "dlq_threshold", "channel", "enabled", "firing")
DETAIL_COLUMNS = (
    "id",
    "namespace",
    "name",
    "group_name",
    "lag_threshold",
    "dlq_threshold",
    "channel",
    "email",
    "webhook_url",
    "enabled",
    "firing",
    "last_evaluated",
    "last_notified",
    "created",
    "updated",
)
EVENT_COLUMNS = ("created", "rule_name", "group_name", "metric", "value", "threshold", "channel", "delivered")

Name = Annotated[str, typer.Argument(help="Alert rule name (unique in the tenant).")]
LagThreshold = Annotated[
    int | None,
    typer.Option("--lag-threshold", min=1, help="Fire when the group's lag reaches this many messages."),
]
DlqThreshold = Annotated[
    int | None, typer.Option("--dlq-threshold", min=1, help="Fire when this many messages are dead-lettered.")
]
Email = Annotated[str | None, typer.Option("--email", help="Notify this address.")]
WebhookUrl = Annotated[str | None, typer.Option("--webhook-url", help="POST a signed JSON body here.")]


RULES = NamedResource(PATH, "alert rule", DETAIL_COLUMNS)
find = RULES.find


def _channel(email: str | None, webhook_url: str | None) -> dict[str, Any]:
    """The channel fields for ``--email`` or ``--webhook-url`` (not both); {} when neither is given."""
    if email and webhook_url:
        raise CliError("give --email or --webhook-url, not both", ExitCode.USAGE)
    if email:
        return {"channel": "email", "email": email, "webhook_url": ""}
    if webhook_url:
        return {"channel": "webhook", "webhook_url": webhook_url, "email": ""}
    return {}


@rules_app.command("list")
def list_rules(tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """List a tenant's alert rules."""
    session = current()
    rows = session.api().list(PATH, tenant=session.tenant(tenant), ordering="name")
    output.emit(rows, fmt, COLUMNS)


@rules_app.command("get")
def get(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """Show one alert rule."""
    output.emit(find(current().tenant(tenant), name), fmt, DETAIL_COLUMNS)


@rules_app.command("create")
def create(
    name: Name,
    group: Annotated[str, typer.Option("--group", help="The consumer group to watch.")],
    tenant: Tenant = None,
    lag_threshold: LagThreshold = None,
    dlq_threshold: DlqThreshold = None,
    email: Email = None,
    webhook_url: WebhookUrl = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it switched off.")] = False,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Create an alert rule. A webhook rule's signing secret is printed once, here (``secret`` shows
    it again).

    \b
    Examples:
      mqctl alert-rule create billing-lag --group billing --lag-threshold 10000 --email ops@acme.example
      mqctl alert-rule create billing-dlq --group billing --dlq-threshold 1 --webhook-url https://hooks.acme.example/mq
    """
    channel = _channel(email, webhook_url)
    if not channel:
        raise CliError("give --email or --webhook-url", ExitCode.USAGE)
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    group_row = groups.find(ns, group)
    body = only_given(
        tenant=tenant_id(api, ns),
        name=name,
        group=group_row["id"],
        lag_threshold=lag_threshold,
        dlq_threshold=dlq_threshold,
        enabled=not disabled,
        **channel,
    )
    row = api.post(PATH, body)
    output.emit(
        row, fmt, (*DETAIL_COLUMNS, "signing_secret") if row.get("channel") == "webhook" else DETAIL_COLUMNS
    )
    output.success(f"alert rule {ns}/{name} created")


@rules_app.command("update")
def update(
    name: Name,
    tenant: Tenant = None,
    lag_threshold: LagThreshold = None,
    dlq_threshold: DlqThreshold = None,
    email: Email = None,
    webhook_url: WebhookUrl = None,
    enabled: Annotated[bool | None, typer.Option("--enable/--disable", show_default=False)] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Change an alert rule (only the options given; --email or --webhook-url switches the channel)."""
    session = current()
    ns = session.tenant(tenant)
    api = session.api()
    row = find(ns, name)
    body = only_given(lag_threshold=lag_threshold, dlq_threshold=dlq_threshold, enabled=enabled)
    body |= _channel(email, webhook_url)
    if not body:
        raise CliError("nothing to change: give an option", ExitCode.USAGE)
    output.emit(api.patch(f"{PATH}{row['id']}/", body), fmt, DETAIL_COLUMNS)


@rules_app.command("delete")
def delete(
    name: Name,
    tenant: Tenant = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete an alert rule (its fired alerts stay in the history)."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    label = RULES.label(ns, name)
    confirm(label, yes)
    session.api().request("DELETE", f"{PATH}{row['id']}/", not_found=label)
    output.success(f"{label} deleted")


def _signing_secret(method: str, action: str, name: str, tenant: str | None, fmt: output.OutputFormat) -> str:
    """Call the rule's signing-secret ``action`` and print the secret; the rule's label."""
    session = current()
    ns = session.tenant(tenant)
    row = find(ns, name)
    what = RULES.label(ns, name)
    data = session.api().request(method, f"{PATH}{row['id']}/{action}/", not_found=what)
    output.emit(data, fmt, ("signing_secret",))
    return what


@rules_app.command("secret")
def secret(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """The webhook signing secret of a rule (developers and up)."""
    _signing_secret("GET", "signing-secret", name, tenant, fmt)


@rules_app.command("rotate-secret")
def rotate_secret(name: Name, tenant: Tenant = None, fmt: Output = output.OutputFormat.TABLE) -> None:
    """A new webhook signing secret; the old one stops signing at once."""
    what = _signing_secret("POST", "rotate-signing-secret", name, tenant, fmt)
    output.success(f"{what}: signing secret rotated")


@events_app.command("list")
def list_events(
    tenant: Tenant = None,
    rule: Annotated[str | None, typer.Option("--rule", help="Only this rule's alerts.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="ISO 8601 time: only alerts from then on.")
    ] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """The alerts that fired, newest first."""
    session = current()
    ns = session.tenant(tenant)
    filters: dict[str, Any] = {"tenant": ns, "ordering": "-created"}
    if rule:
        filters["rule_id"] = find(ns, rule)["id"]
    if since:
        filters["since"] = since
    output.emit(session.api().list(EVENTS, **filters), fmt, EVENT_COLUMNS)
