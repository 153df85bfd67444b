"""mqctl's report commands (usage, lag, invoices, job runs) over the rows the analytics loader
writes, read back through the control plane API of a live stack."""

from __future__ import annotations

import json

from tests.integration.cli.conftest import Mqctl, Stack


def _seed(stack: Stack, namespace: str) -> int:
    """Rows as the nightly jobs leave them for ``namespace``; the invoice id."""
    code = f"""
import datetime
from decimal import Decimal
from tenants.models import Tenant
from tenants.models.analytics import Invoice, InvoiceLine, JobRun, LagDaily, UsageDaily
t = Tenant.objects.get(namespace={namespace!r})
for day, n in ((datetime.date(2026, 10, 1), 100), (datetime.date(2026, 10, 2), 250)):
    UsageDaily.objects.create(tenant=t, namespace=t.namespace, date=day, messages_in=n,
                              messages_out=2 * n, bytes_in=1024 * n, topic_days=3)
LagDaily.objects.create(tenant=t, namespace=t.namespace, group_name="billing",
                        date=datetime.date(2026, 10, 2), p50_lag_messages=4, p95_lag_messages=40,
                        max_lag_messages=90, p95_lag_ms=1500, minutes_above_slo=7, stuck_minutes=2)
inv = Invoice.objects.create(tenant=t, namespace=t.namespace, period_start=datetime.date(2026, 10, 1),
                             period_end=datetime.date(2026, 10, 31), plan="default",
                             base_amount=Decimal("10"), usage_amount=Decimal("2.5"), total=Decimal("12.50"))
InvoiceLine.objects.create(invoice=inv, tenant=t, namespace=t.namespace, date=datetime.date(2026, 10, 2),
                           plan="default", item="requests", quantity_raw=350, quantity=Decimal("0.00035"),
                           unit="M", unit_price=Decimal("1"), price_unit="per million",
                           amount=Decimal("0.00035"))
JobRun.objects.create(job="billing", date=datetime.date(2026, 10, 2), status="succeeded", rows_in=350)
print(inv.id)
"""
    return int(stack.manage("shell", "-c", code).strip().splitlines()[-1])


def test_usage_lag_invoices_and_job_runs(stack: Stack, operator: Mqctl, tenant: str) -> None:
    invoice_id = _seed(stack, tenant)

    days = operator.json("usage", "daily", "--from", "2026-10-01", "--to", "2026-10-31")
    assert [(d["date"], d["messages_in"], d["messages_out"]) for d in days] == [
        ("2026-10-01", 100, 200),
        ("2026-10-02", 250, 500),
    ]
    assert operator.json("usage", "daily", "--from", "2026-10-02") == days[1:]

    [lag] = operator.json("usage", "lag", "-g", "billing")
    assert (lag["group_name"], lag["p95_lag_messages"], lag["minutes_above_slo"]) == ("billing", 40, 7)
    assert operator.json("usage", "lag", "-g", "someone-else") == []

    [listed] = operator.json("billing", "invoices", "--month", "2026-10")
    assert listed["id"] == invoice_id and listed["total"] == "12.50"
    assert "12.50" in operator.ok("billing", "invoices").stdout  # the table
    one = operator.json("billing", "invoice", str(invoice_id))
    assert [(line["item"], line["quantity_raw"]) for line in one["lines"]] == [("requests", 350)]
    missing = operator("billing", "invoice", "999999")
    assert missing.exit_code == 3, missing.output  # not found

    runs = json.loads(operator.ok("analytics", "jobs", "--job", "billing", "-o", "json").stdout)
    assert any(r["date"] == "2026-10-02" and r["status"] == "succeeded" for r in runs)
