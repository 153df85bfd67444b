"""Load the jobs' Parquet outputs into the control-plane database (the only Django code in analytics/).

Each day is replaced as a whole inside one transaction, so loading a re-run day again gives the
same rows; invoices are upserted per tenant and month, keeping their ids (lines point to them).
Reads go through pyarrow filesystems: a local directory or an object store URL.
"""

from __future__ import annotations

import logging
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyarrow import fs as pafs

__all__ = ("load", "load_billing_day", "load_lag_day")

logger = logging.getLogger(__name__)


def _read(output: str, relative: str) -> list[dict[str, Any]]:
    """Rows of one partition directory; none when the job did not write it."""
    if "://" in output and not output.startswith("file://"):
        filesystem, base = pafs.FileSystem.from_uri(output)
    else:
        filesystem, base = pafs.LocalFileSystem(), str(Path(output.removeprefix("file://")).resolve())
    path = f"{str(base).rstrip('/')}/{relative}"
    if filesystem.get_file_info(path).type != pafs.FileType.Directory:
        return []
    table = pq.read_table(path, filesystem=filesystem, partitioning=None)
    return list(table.to_pylist())


def _micros(value: int) -> Decimal:
    return Decimal(value) / 1_000_000


def load_billing_day(output: str, day: str) -> dict[str, int]:
    """UsageDaily and InvoiceLine rows of ``day``, and the invoices of its month."""
    from django.db import transaction

    from tenants.models import Invoice, InvoiceLine, Tenant, UsageDaily

    usage = _read(output, f"usage_daily/date={day}")
    lines = _read(output, f"invoice_lines/date={day}")
    invoices = _read(output, f"invoices/month={day[:7]}")
    the_day = date.fromisoformat(day)
    names = {r["tenant"] for r in (*usage, *lines, *invoices)}
    tenant_ids = dict(Tenant.objects.filter(namespace__in=names).values_list("namespace", "id"))
    with transaction.atomic():
        by_tenant = {}
        for r in invoices:
            invoice, _ = Invoice.objects.update_or_create(
                namespace=r["tenant"],
                period_start=date.fromisoformat(r["period_start"]),
                defaults={
                    "tenant_id": tenant_ids.get(r["tenant"]),
                    "period_end": date.fromisoformat(r["period_end"]),
                    "plan": r["plan"] or "",
                    "currency": r["currency"] or "USD",
                    "days_billed": r["days_billed"],
                    "base_amount": _micros(r["base_micros"]),
                    "usage_amount": _micros(r["usage_micros"]),
                    "total": r["total"],
                    "final": r["final"],
                },
            )
            by_tenant[r["tenant"]] = invoice.pk
        UsageDaily.objects.filter(date=the_day).delete()
        UsageDaily.objects.bulk_create(
            UsageDaily(tenant_id=tenant_ids.get(r["tenant"]), namespace=r["tenant"], date=the_day,
                       **{k: v for k, v in r.items() if k != "tenant"})
            for r in usage
        )  # fmt: skip
        InvoiceLine.objects.filter(date=the_day).delete()
        InvoiceLine.objects.bulk_create(
            InvoiceLine(
                invoice_id=by_tenant.get(r["tenant"]), tenant_id=tenant_ids.get(r["tenant"]),
                namespace=r["tenant"], date=the_day, plan=r["plan"] or "", item=r["item"],
                quantity_raw=r["quantity_raw"], quantity=r["quantity"], unit=r["unit"],
                unit_price=r["unit_price"], price_unit=r["price_unit"], amount=r["amount"],
                currency=r["currency"] or "USD",
            )
            for r in lines
        )  # fmt: skip
    return {"usage_daily": len(usage), "invoice_lines": len(lines), "invoices": len(invoices)}


def load_lag_day(output: str, day: str) -> dict[str, int]:
    """LagDaily rows of ``day``."""
    from django.db import transaction

    from tenants.models import ConsumerGroup, LagDaily, Tenant

    rows = _read(output, f"lag_daily/date={day}")
    the_day = date.fromisoformat(day)
    names = {r["tenant"] for r in rows}
    tenant_ids = dict(Tenant.objects.filter(namespace__in=names).values_list("namespace", "id"))
    group_ids = {
        (ns, name): pk
        for pk, ns, name in ConsumerGroup.objects.filter(tenant__namespace__in=names).values_list(
            "id", "tenant__namespace", "name"
        )
    }
    with transaction.atomic():
        LagDaily.objects.filter(date=the_day).delete()
        LagDaily.objects.bulk_create(
            LagDaily(
                tenant_id=tenant_ids.get(r["tenant"]),
                group_id=group_ids.get((r["tenant"], r["group"])),
                namespace=r["tenant"],
                group_name=r["group"],
                date=the_day,
                **{k: v for k, v in r.items() if k not in ("tenant", "group")},
            )
            for r in rows
        )
    return {"lag_daily": len(rows)}


def load(job: str, output: str, days: list[str]) -> dict[str, dict[str, int]]:
    """Load every listed day of ``job``; returns the rows loaded per day and table."""
    loader = load_billing_day if job == "billing" else load_lag_day
    loaded = {}
    for day in days:
        loaded[day] = loader(output, day)
        logger.info("loaded %s %s: %s", job, day, loaded[day])
    return loaded
