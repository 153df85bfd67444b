"""``mqctl usage``: metered usage and consumer lag per day, as the nightly analytics jobs computed them.

Reads ``/api/v1/usage-daily/`` and ``/api/v1/lag-daily/`` (filters ``tenant``, ``since``, ``until``,
``group``); members see their tenants' rows, operators every row.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli import output
from cli.options import Output, Tenant
from cli.session import current

__all__ = ("DateFrom", "DateTo", "app")

app = typer.Typer(
    no_args_is_help=True, help="Usage per day (messages, bytes, storage) and daily consumer lag."
)

DateFrom = Annotated[str | None, typer.Option("--from", help="First day, YYYY-MM-DD.")]
DateTo = Annotated[str | None, typer.Option("--to", help="Last day, YYYY-MM-DD.")]
USAGE_COLUMNS = (
    "date",
    "namespace",
    "messages_in",
    "messages_out",
    "bytes_in",
    "bytes_out",
    "api_calls",
    "storage_gb_hours",
    "topic_days",
)
LAG_COLUMNS = (
    "date",
    "namespace",
    "group_name",
    "p50_lag_messages",
    "p95_lag_messages",
    "max_lag_messages",
    "p95_lag_ms",
    "minutes_above_slo",
    "stuck_minutes",
)


@app.command("daily")
def daily(
    tenant: Tenant = None,
    date_from: DateFrom = None,
    date_to: DateTo = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """A tenant's usage per day, oldest first.

    \b
    Examples:
      mqctl usage daily --tenant acme --from 2026-01-01 --to 2026-01-31 -o json
    """
    session = current()
    rows = session.api().list(
        "usage-daily/", tenant=session.tenant(tenant), since=date_from, until=date_to, ordering="date"
    )
    output.emit(rows, fmt, USAGE_COLUMNS)


@app.command("lag")
def lag(
    tenant: Tenant = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this consumer group.")] = None,
    date_from: DateFrom = None,
    date_to: DateTo = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Daily consumer-lag figures per group (percentiles, time above the SLO, stuck minutes)."""
    session = current()
    rows = session.api().list(
        "lag-daily/",
        tenant=session.tenant(tenant),
        group=group,
        since=date_from,
        until=date_to,
        ordering="date",
    )
    output.emit(rows, fmt, LAG_COLUMNS)
