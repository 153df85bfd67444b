"""The HTML page of a run report: run facts, the charts (PNG files beside it) and every row as a table.

Plain string building with ``html.escape`` (no template engine: analytics/ stays free of Django).
Each table row carries ``data-tenant`` (and ``data-group``) and each cell ``data-field``, so a
reader or a test can pick figures out without depending on the layout.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from analytics.constants import GB
from analytics.report.data import BillingReportData, LagReportData

__all__ = ("billing_page", "lag_page", "money")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0 2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: bold; border-top: 2px solid #444; }
img { max-width: 100%; display: block; margin: 1em 0; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; }
"""


def money(micros: int) -> str:
    """Micro-units as the exact decimal amount with six places (``136610`` -> ``0.136610``)."""
    return f"{Decimal(micros) / 1_000_000:.6f}"


def _count(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _gb(value: int) -> str:
    return f"{Decimal(value) / GB:.6f}"


def _cell(field: str, text: str, numeric: bool = True) -> str:
    cls = ' class="n"' if numeric else ""
    return f'<td data-field="{field}"{cls}>{html.escape(text)}</td>'


def _table(table_id: str, headers: Sequence[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _facts(run: dict[str, Any]) -> str:
    items = "".join(
        f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>"
        for k, v in run.items()
        if v not in ("", None)
    )
    return f"<dl>{items}</dl>"


def _page(title: str, run: dict[str, Any], charts: Sequence[str], body: str) -> str:
    images = "".join(f'<img src="{html.escape(c)}" alt="{html.escape(c)}">' for c in charts)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"{_facts(run)}{images}{body}</body></html>\n"
    )


def billing_page(data: BillingReportData, run: dict[str, Any], charts: Sequence[str]) -> str:
    """Usage and the day's charges per tenant (with a total row), then the month's invoices."""
    counters = ("messages_in", "messages_out", "requests_in_4k", "requests_out_4k")
    rows = []
    for r in data.usage:
        tenant = r["tenant"]
        rows.append(
            f'<tr data-tenant="{html.escape(tenant)}">{_cell("tenant", tenant, False)}'
            + "".join(_cell(c, _count(r[c])) for c in counters)
            + _cell("gb_in", _gb(r["bytes_in"]))
            + _cell("gb_out", _gb(r["bytes_out"]))
            + _cell("storage_gb_hours", f"{r['storage_gb_hours']:.6f}")
            + _cell("topic_days", _count(r["topic_days"]))
            + _cell("charges", money(data.day_charges.get(tenant, 0)))
            + _cell("currency", data.currency.get(tenant, ""), False)
            + "</tr>"
        )
    total_charges = sum(data.day_charges.values())
    rows.append(
        '<tr class="total" data-tenant="*">'
        + _cell("tenant", "all tenants", False)
        + "".join(_cell(c, _count(sum(r[c] for r in data.usage))) for c in counters)
        + _cell("gb_in", _gb(sum(r["bytes_in"] for r in data.usage)))
        + _cell("gb_out", _gb(sum(r["bytes_out"] for r in data.usage)))
        + _cell("storage_gb_hours", f"{sum(Decimal(r['storage_gb_hours']) for r in data.usage):.6f}")
        + _cell("topic_days", _count(sum(r["topic_days"] for r in data.usage)))
        + _cell("charges", money(total_charges))
        + _cell("currency", "", False)
        + "</tr>"
    )
    usage = _table(
        "usage",
        ("tenant", "messages in", "messages out", "requests in (4 KiB)", "requests out (4 KiB)", "GB in",
         "GB out", "storage GB-hours", "topic-days", f"charges {data.day}", "currency"),
        rows,
    )  # fmt: skip
    invoice_rows = [
        f'<tr data-tenant="{html.escape(r["tenant"])}">'
        + _cell("tenant", r["tenant"], False)
        + _cell("plan", r["plan"] or "", False)
        + _cell("days_billed", str(r["days_billed"]))
        + _cell("base", money(r["base_micros"]))
        + _cell("usage", money(r["usage_micros"]))
        + _cell("total", f"{r['total']:.2f}")
        + _cell("currency", r["currency"] or "", False)
        + _cell("final", "final" if r["final"] else "month to date", False)
        + "</tr>"
        for r in data.invoices
    ]
    invoices = _table(
        "invoices",
        ("tenant", "plan", "days billed", "monthly fee", "usage", "total", "currency", "status"),
        invoice_rows,
    )
    body = f"<h2>Usage and charges on {data.day}</h2>{usage}<h2>Invoices for {data.day[:7]}</h2>{invoices}"
    return _page(f"Billing report {data.day}", run, charts, body)


def _seconds(ms: int | None) -> str:
    return "" if ms is None else f"{Decimal(ms) / 1000:.3f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}%"


def lag_page(data: LagReportData, run: dict[str, Any], charts: Sequence[str]) -> str:
    """Every group's percentiles, SLO minutes, stuck queues and trend."""
    rows = []
    for r in data.groups:
        slo = " / ".join(
            s for s in (
                f"{r['lag_slo_messages']:,} msgs" if r["lag_slo_messages"] is not None else "",
                f"{r['lag_slo_seconds']} s" if r["lag_slo_seconds"] is not None else "",
            ) if s
        )  # fmt: skip
        rows.append(
            f'<tr data-tenant="{html.escape(r["tenant"])}" data-group="{html.escape(r["group"])}">'
            + _cell("tenant", r["tenant"], False)
            + _cell("group", r["group"], False)
            + _cell("minutes_sampled", _count(r["minutes_sampled"]))
            + "".join(
                _cell(f"{p}_lag_messages", _count(r[f"{p}_lag_messages"])) for p in ("p50", "p95", "max")
            )
            + "".join(_cell(f"{p}_lag_s", _seconds(r[f"{p}_lag_ms"])) for p in ("p50", "p95", "max"))
            + _cell("slo", slo, False)
            + _cell("minutes_above_slo", _count(r["minutes_above_slo"]))
            + _cell("stuck_minutes", _count(r["stuck_minutes"]))
            + _cell("stuck_queues", _count(r["stuck_queues"]))
            + _cell("trend_lag_messages_pct", _pct(r["trend_lag_messages_pct"]))
            + "</tr>"
        )
    table = _table(
        "lag",
        ("tenant", "group", "minutes sampled", "p50 msgs", "p95 msgs", "max msgs", "p50 s", "p95 s",
         "max s", "SLO", "minutes above SLO", "stuck minutes", "stuck queues", "p95 vs week before"),
        rows,
    )  # fmt: skip
    return _page(f"Consumer lag report {data.day}", run, charts, f"<h2>Groups on {data.day}</h2>{table}")
