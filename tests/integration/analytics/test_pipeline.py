"""From the control plane: export, the Celery task running spark-submit, the loader, the REST API."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from analytics import jobs, loader
from analytics.synthetic import lag_record, write_records
from tenants.choices import JobRunStatus, MembershipRole
from tenants.models import (
    ConsumerGroup,
    Invoice,
    InvoiceLine,
    JobRun,
    LagDaily,
    Membership,
    Plan,
    Tenant,
    UsageDaily,
)
from tenants.tasks import run_analytics_job_task
from tests.integration.analytics.test_billing import DAY, _hand_dataset, _t

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def analytics_settings(settings: Any, tmp_path: Path) -> dict[str, Any]:
    settings.MQ_ANALYTICS = {
        "SPARK_MASTER": "local[1]",
        "INPUT_URL": str(tmp_path / "metering"),
        "OUTPUT_URL": str(tmp_path / "analytics"),
        "LATE_DAYS": 0,
        "STUCK_MINUTES": 10,
        "TIMEOUT_S": 600.0,
    }
    return dict(settings.MQ_ANALYTICS)


@pytest.fixture
def plans(db: None) -> dict[str, Plan]:
    pro = Plan.objects.create(
        name="pro", price_monthly=Decimal("10.00"), price_per_million_requests=Decimal("0.4"),
        price_per_gb_in=Decimal("0.01"), price_per_gb_out=Decimal("0.09"), price_per_gb_month=Decimal("0.23"),
        price_per_topic_day=Decimal("0.01"),
    )  # fmt: skip
    standard = Plan.objects.create(
        name="standard", is_default=True, price_monthly=Decimal("5.00"),
        price_per_million_requests=Decimal("0.5"), price_per_gb_out=Decimal("0.1"),
        price_per_gb_month=Decimal("0.1"),
    )  # fmt: skip
    Tenant.objects.create(name="Acme", namespace="acme", plan=pro)
    Tenant.objects.create(name="Initech", namespace="initech")  # the default plan
    return {"pro": pro, "standard": standard}


def test_celery_task_runs_spark_submit_and_loads_the_results(
    analytics_settings: dict[str, Any], plans: dict[str, Plan]
) -> None:
    # given a day of metering records and the plans in the database
    _hand_dataset(Path(analytics_settings["INPUT_URL"]))
    # when the task runs (eager in tests): export, spark-submit, load
    result = run_analytics_job_task.delay("billing", DAY).get()
    # then the run is recorded
    run = JobRun.objects.get(pk=result["job_run"])
    assert (run.status, run.job, run.date, run.rows_in) == (
        JobRunStatus.SUCCEEDED,
        "billing",
        date(2025, 3, 10),
        10,
    )
    assert run.rows_out == 2 + 10 + 3 and run.duration_s and run.duration_s > 0 and run.error == ""
    # the run's HTML report sits next to its outputs and the run record names it (console link)
    report = Path(analytics_settings["OUTPUT_URL"]) / "reports" / "billing" / f"date={DAY}"
    assert run.details["report_page"] == str(report / "index.html")
    assert "10.14" in (report / "index.html").read_text()  # acme's month-to-date invoice total
    # and the figures computed by hand are in the database
    acme = Tenant.objects.get(namespace="acme")
    usage = UsageDaily.objects.get(tenant=acme, date=date(2025, 3, 10))
    assert (usage.requests_in_4k, usage.storage_gb_hours, usage.topic_days) == (262156, Decimal("5.5"), 2)
    invoice = Invoice.objects.get(tenant=acme)
    assert (invoice.total, invoice.plan, invoice.days_billed) == (Decimal("10.14"), "pro", 1)
    assert invoice.lines.count() == 6
    assert sum(line.amount for line in invoice.lines.all()) == Decimal("0.136610")
    assert Invoice.objects.get(namespace="initech").total == Decimal("5.00")
    # globex is unknown to the control plane: billed at the default plan, kept without a tenant
    assert InvoiceLine.objects.filter(namespace="globex", tenant__isnull=True, plan="standard").count() == 4
    # the prices were exported for the day as a job input
    assert (Path(analytics_settings["INPUT_URL"]) / "prices" / f"date={DAY}" / "prices.jsonl").exists()
    # loading the same outputs again changes nothing
    loader.load("billing", analytics_settings["OUTPUT_URL"], [DAY])
    assert (UsageDaily.objects.count(), InvoiceLine.objects.count(), Invoice.objects.count()) == (2, 10, 3)


def test_second_copy_of_a_running_job_is_skipped(analytics_settings: dict[str, Any], db: None) -> None:
    JobRun.objects.create(job="lag", date=date(2025, 3, 10))
    result = run_analytics_job_task.delay("lag", DAY).get()
    run = JobRun.objects.get(pk=result["job_run"])
    assert run.status == JobRunStatus.SKIPPED and "already running" in run.error


def test_loader_writes_lag_rows(spark: Any, roots: tuple[Path, Path], db: None) -> None:
    root, out = roots
    tenant = Tenant.objects.create(name="Acme", namespace="acme")
    group = ConsumerGroup.objects.create(tenant=tenant, name="orders-consumer", lag_slo_messages=3)
    write_records(
        root,
        "lag",
        [lag_record("b1", "acme", "orders-consumer", "orders", 0, _t(f"10:0{m}"), 0, m * 2, m * 1000,
                    _t("10:09")) for m in range(5)],
    )  # fmt: skip
    jobs.run_job(spark, "lag", DAY, str(root), str(out))
    loader.load("lag", str(out), [DAY])
    loader.load("lag", str(out), [DAY])
    row = LagDaily.objects.get()
    assert (row.group, row.tenant, row.max_lag_messages, row.p50_lag_messages) == (group, tenant, 8, 4)
    assert row.minutes_sampled == 5 and row.minutes_above_slo is None  # the export had no SLO


def test_api_shows_members_their_rows_and_job_runs_to_operators(db: None) -> None:
    user_model = get_user_model()
    acme = Tenant.objects.create(name="Acme", namespace="acme")
    other = Tenant.objects.create(name="Globex", namespace="globex")
    invoice = Invoice.objects.create(
        tenant=acme, namespace="acme", period_start=date(2025, 3, 1), period_end=date(2025, 3, 31),
        plan="pro", total=Decimal("10.14"),
    )  # fmt: skip
    InvoiceLine.objects.create(
        invoice=invoice, tenant=acme, namespace="acme", date=date(2025, 3, 10), plan="pro", item="topics",
        quantity_raw=2, quantity=2, unit="topic-day", unit_price=Decimal("0.01"), price_unit="per topic-day",
        amount=Decimal("0.02"),
    )  # fmt: skip
    Invoice.objects.create(tenant=other, namespace="globex", period_start=date(2025, 3, 1),
                           period_end=date(2025, 3, 31))  # fmt: skip
    JobRun.objects.create(job="billing", date=date(2025, 3, 10), status=JobRunStatus.SUCCEEDED)
    viewer = user_model.objects.create_user("viewer")
    Membership.objects.create(user=viewer, tenant=acme, role=MembershipRole.VIEWER)
    operator = user_model.objects.create_user("op", is_staff=True)
    client = APIClient()
    client.force_authenticate(viewer)
    body = client.get("/api/v1/invoices/?month=2025-03").json()
    assert body["count"] == 1 and body["results"][0]["total"] == "10.14"
    assert body["results"][0]["lines"][0]["item"] == "topics"
    assert client.get("/api/v1/invoices/?tenant=globex").json()["count"] == 0
    assert client.get("/api/v1/job-runs/").status_code == 403
    client.force_authenticate(operator)
    assert client.get("/api/v1/invoices/").json()["count"] == 2
    assert client.get("/api/v1/job-runs/?job=billing").json()["results"][0]["status"] == "succeeded"
