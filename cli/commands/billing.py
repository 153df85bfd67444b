"""``mqctl billing``: invoices the billing job produced (``/api/v1/invoices/``), and the plans."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli import output
from cli.options import Output, Tenant
from cli.session import current

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True, help="Invoices (with their lines) and plans.")

INVOICE_COLUMNS = (
    "id",
    "period_start",
    "period_end",
    "plan",
    "days_billed",
    "base_amount",
    "usage_amount",
    "total",
    "currency",
    "final",
)
LINE_COLUMNS = ("date", "item", "quantity", "unit", "unit_price", "price_unit", "amount", "currency")


def _without_lines(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "lines"}


@app.command("invoices")
def invoices(
    tenant: Tenant = None,
    month: Annotated[str | None, typer.Option("--month", help="Only this month, YYYY-MM.")] = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """A tenant's invoices, newest first (JSON and YAML include every line)."""
    session = current()
    rows = session.api().list(
        "invoices/", tenant=session.tenant(tenant), month=month, ordering="-period_start"
    )
    if fmt is output.OutputFormat.TABLE:
        rows = [_without_lines(r) for r in rows]
    output.emit(rows, fmt, INVOICE_COLUMNS)


@app.command("invoice")
def invoice(
    invoice_id: Annotated[int, typer.Argument(help="Invoice id (from billing invoices).")],
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """One invoice with its lines."""
    row = current().api().request("GET", f"invoices/{invoice_id}/", not_found=f"invoice {invoice_id}")
    if fmt is not output.OutputFormat.TABLE:
        output.emit(row, fmt)
        return
    output.emit(_without_lines(row), fmt, title=f"invoice {invoice_id}")
    output.emit(row.get("lines") or [], fmt, LINE_COLUMNS, title="lines")


@app.command("plans")
def plans(fmt: Output = output.OutputFormat.TABLE) -> None:
    """Plans with their limits and prices."""
    rows = current().api().list("plans/", ordering="name")
    output.emit(
        rows,
        fmt,
        (
            "name",
            "is_default",
            "price_monthly",
            "price_per_million_requests",
            "price_per_gb_month",
            "produce_messages_per_s",
            "max_topics",
            "max_groups",
        ),
    )
