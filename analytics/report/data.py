"""What a run report shows, read back from the Parquet outputs the run has just written.

The report reads the job's outputs rather than its in-memory frames, so it shows exactly what the
loader loads into the database. Rows are small (one per tenant or group) and are collected to the
driver as plain Python values; nothing here renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from pyspark.sql import SparkSession

from analytics import io
from analytics.schemas import INVOICE_LINES, INVOICES, LAG_DAILY, USAGE_DAILY

__all__ = ("BillingReportData", "LagReportData", "billing_data", "lag_data")

Row = dict[str, Any]


@dataclass(slots=True)
class BillingReportData:
    """One billed day: usage and charges per tenant, the month so far, and the invoices."""

    day: str
    usage: list[Row]  # USAGE_DAILY rows of the day, by tenant
    day_charges: dict[str, int]  # tenant -> sum of the day's invoice lines, micro-units
    month_charges: dict[str, dict[str, int]]  # billed day -> tenant -> micro-units
    invoices: list[Row]  # INVOICES rows of the month, by tenant
    currency: dict[str, str] = field(default_factory=dict)  # tenant -> currency of its plan


@dataclass(slots=True)
class LagReportData:
    """One reported day: every group's LAG_DAILY row, and the p95 history of the week before."""

    day: str
    groups: list[Row]  # LAG_DAILY rows, by tenant and group
    history: dict[str, dict[tuple[str, str], int]]  # day -> (tenant, group) -> p95 lag in messages


def _collect(spark: SparkSession, base: str, key: str, values: list[str], schema: Any) -> list[Row]:
    frame = io.read_parquet(spark, base, key, values, schema)
    return [r.asDict() for r in frame.collect()]


def billing_data(spark: SparkSession, output: str, day: str) -> BillingReportData:
    """The day's usage, its month's lines summed per day and tenant, and the month's invoices."""
    month_days = [v for v in io.list_partitions(spark, f"{output}/invoice_lines", "date") if v[:7] == day[:7]]
    month_days = [d for d in month_days if d <= day]
    usage = _collect(spark, f"{output}/usage_daily", "date", [day], USAGE_DAILY)
    lines = _collect(spark, f"{output}/invoice_lines", "date", month_days, INVOICE_LINES)
    invoices = _collect(spark, f"{output}/invoices", "month", [day[:7]], INVOICES)
    month_charges: dict[str, dict[str, int]] = {d: {} for d in month_days}
    currency: dict[str, str] = {}
    for line in lines:
        per_tenant = month_charges[line["date"]]
        per_tenant[line["tenant"]] = per_tenant.get(line["tenant"], 0) + int(line["amount_micros"])
        currency[line["tenant"]] = line["currency"] or "USD"
    for invoice in invoices:
        currency[invoice["tenant"]] = invoice["currency"] or "USD"
    return BillingReportData(
        day=day,
        usage=sorted(usage, key=lambda r: r["tenant"]),
        day_charges=dict(month_charges.get(day, {})),
        month_charges=month_charges,
        invoices=sorted(invoices, key=lambda r: r["tenant"]),
        currency=currency,
    )


def lag_data(spark: SparkSession, output: str, day: str) -> LagReportData:
    """The day's LAG_DAILY rows and the p95 (messages) of every group on the seven days before."""
    done = set(io.list_partitions(spark, f"{output}/lag_daily", "date"))
    week = [(date.fromisoformat(day) - timedelta(days=k)).isoformat() for k in range(7, 0, -1)]
    rows = _collect(spark, f"{output}/lag_daily", "date", [day], LAG_DAILY)
    earlier = _collect(spark, f"{output}/lag_daily", "date", [d for d in week if d in done], LAG_DAILY)
    history: dict[str, dict[tuple[str, str], int]] = {}
    for r in [*earlier, *rows]:
        history.setdefault(r["date"], {})[(r["tenant"], r["group"])] = int(r["p95_lag_messages"] or 0)
    return LagReportData(
        day=day,
        groups=sorted(rows, key=lambda r: (r["tenant"], r["group"])),
        history=dict(sorted(history.items())),
    )
