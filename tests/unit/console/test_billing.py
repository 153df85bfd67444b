"""The billing & reports page (usage per day, invoices with lines, lag report) and the operators'
analytics job runs, over rows as the nightly jobs' loader writes them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tenants.models import Invoice, InvoiceLine, JobRun, LagDaily, UsageDaily

from .conftest import Platform

pytestmark = pytest.mark.django_db


def _seed(p: Platform) -> None:
    today = date.today()
    for tenant, n in ((p.tenant, 1234567), (p.other, 999)):
        UsageDaily.objects.create(
            tenant=tenant, namespace=tenant.namespace, date=today - timedelta(days=1), messages_in=n
        )
    UsageDaily.objects.create(
        tenant=p.tenant, namespace=p.tenant.namespace, date=today - timedelta(days=40), messages_in=555
    )
    inv = Invoice.objects.create(
        tenant=p.tenant,
        namespace=p.tenant.namespace,
        period_start=today.replace(day=1),
        period_end=today,
        plan="gold",
        total=Decimal("42.17"),
    )
    InvoiceLine.objects.create(
        invoice=inv,
        tenant=p.tenant,
        namespace=p.tenant.namespace,
        date=today - timedelta(days=1),
        plan="gold",
        item="storage",
        quantity_raw=10,
        quantity=Decimal("1.5"),
        unit="GB-h",
        unit_price=Decimal("0.23"),
        price_unit="per GB-month",
        amount=Decimal("0.345"),
    )
    LagDaily.objects.create(
        tenant=p.tenant,
        namespace=p.tenant.namespace,
        group_name="payments",
        date=today - timedelta(days=1),
        p95_lag_messages=8080,
    )


def test_a_tenant_sees_its_own_usage_invoices_and_lag(
    platform: Platform, browser_for: Callable[..., Any]
) -> None:
    _seed(platform)
    page = browser_for("viewer").get(f"/t/{platform.tenant.namespace}/billing/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "1234567" in html and "42.17" in html and "storage" in html and "8080" in html
    assert "999" not in html  # another tenant's usage
    assert "555" not in html  # older than the 31 days shown
    assert 'id="chart-messages_in"' in html and 'style="height: 100.0%"' in html


def test_empty_billing_page_explains_when_figures_come(
    platform: Platform, browser_for: Callable[..., Any]
) -> None:
    html = browser_for("owner").get(f"/t/{platform.tenant.namespace}/billing/").content.decode()
    assert "No usage billed yet" in html and "No invoice yet" in html and "No lag report yet" in html


def test_operators_see_job_runs_filtered(platform: Platform, browser_for: Callable[..., Any]) -> None:
    JobRun.objects.create(job="billing", date=date(2026, 10, 2), status="succeeded", rows_in=31337)
    JobRun.objects.create(job="lag", date=date(2026, 10, 2), status="failed", error="java not found")
    operator = browser_for("operator")
    both = operator.get("/platform/jobs/").content.decode()
    assert "31337" in both and "java not found" in both
    failed = operator.get("/platform/jobs/?status=failed").content.decode()
    assert "java not found" in failed and "31337" not in failed
