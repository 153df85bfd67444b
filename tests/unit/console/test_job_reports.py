"""Analytics run reports in the console: operators get a run's page, charts and report.json from
its report directory (and each late day's); tenants get nothing; nothing outside is reachable.

The report directories are written by the analytics renderer itself (page + charts, no Spark)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analytics.report.charts import billing_charts
from analytics.report.data import BillingReportData
from analytics.report.page import billing_page
from tenants.models import JobRun
from tenants.services import reports

from .conftest import Platform

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n"


def _render(directory: Path, day: str, tenant: str, messages_in: int) -> None:
    """One day's report as ``analytics.report.write_run_report`` lays it out."""
    usage = {
        "tenant": tenant, "messages_in": messages_in, "messages_out": 3, "requests_in_4k": 12,
        "requests_out_4k": 3, "bytes_in": 4096, "bytes_out": 1024, "api_calls": 15,
        "storage_byte_hours": 0, "storage_gb_hours": Decimal("0.000000"), "topic_days": 1,
    }  # fmt: skip
    data = BillingReportData(
        day=day, usage=[usage], day_charges={tenant: 1200}, month_charges={day: {tenant: 1200}}, invoices=[]
    )
    directory.mkdir(parents=True)
    charts = billing_charts(data, directory)
    (directory / "index.html").write_text(billing_page(data, {"job": "billing", "date": day}, charts))
    (directory / "report.json").write_text(json.dumps({"page": "index.html", "charts": charts, "day": day}))


@pytest.fixture
def run(tmp_path: Path) -> JobRun:
    """A billing run of 2026-10-02 that also re-ran the late day 2026-10-01, with both reports."""
    reports_dir = tmp_path / "analytics" / "reports" / "billing"
    main, late = reports_dir / "date=2026-10-02", reports_dir / "date=2026-10-01"
    _render(main, "2026-10-02", "acme", 4242)
    _render(late, "2026-10-01", "acme", 1717)
    # things that must stay out of reach: a file beside the reports, one inside that is no report
    # file, and a symlink named like a chart that leads out of the directory
    (tmp_path / "secret.png").write_bytes(PNG + b"not yours")
    (main / "notes.txt").write_text("scratch")
    (main / "leak.png").symlink_to(tmp_path / "secret.png")
    (main / "parent.png").symlink_to(reports_dir / "date=2026-10-01" / "tenant_usage.png")
    details = {
        "job": "billing",
        "days": [
            {"date": "2026-10-02", "skipped": False, "report": str(main)},
            {"date": "2026-10-01", "skipped": False, "report": f"file://{late}"},
            {"date": "2026-09-30", "skipped": True, "report": ""},
        ],
        "report": str(main),
        "report_page": f"{main}/index.html",
    }
    return JobRun.objects.create(job="billing", date=date(2026, 10, 2), status="succeeded", details=details)


def test_operator_gets_the_page_its_charts_and_report_json(
    platform: Platform, browser_for: Callable[..., Any], run: JobRun
) -> None:
    operator = browser_for("operator")
    base = f"/platform/jobs/{run.pk}/report/"
    # the job list links the requested day's report and the late day's
    listing = operator.get("/platform/jobs/").content.decode()
    assert f'href="{base}"' in listing and f'href="{base}date=2026-10-01/"' in listing
    assert "2026-09-30" not in listing.split('id="job-runs"')[1]  # skipped: no report

    page = operator.get(base)
    assert page.status_code == 200 and page["Content-Type"] == "text/html; charset=utf-8"
    html = b"".join(page.streaming_content).decode()  # type: ignore[attr-defined]
    assert '<td data-field="messages_in" class="n">4,242</td>' in html
    assert '<img src="tenant_usage.png"' in html  # relative: resolves under report/
    assert "default-src 'none'" in page["Content-Security-Policy"]

    chart = operator.get(f"{base}tenant_usage.png")
    assert chart.status_code == 200 and chart["Content-Type"] == "image/png"
    body = b"".join(chart.streaming_content)  # type: ignore[attr-defined]
    assert body[:8] == PNG and body == (Path(run.details["report"]) / "tenant_usage.png").read_bytes()

    summary = operator.get(f"{base}report.json")
    assert summary["Content-Type"] == "application/json"
    assert json.loads(b"".join(summary.streaming_content))["day"] == "2026-10-02"  # type: ignore[attr-defined]

    late = operator.get(f"{base}date=2026-10-01/")
    assert '<td data-field="messages_in" class="n">1,717</td>' in b"".join(late.streaming_content).decode()  # type: ignore[attr-defined]
    assert operator.get(f"{base}date=2026-10-01/daily_charges.png")["Content-Type"] == "image/png"


def test_operators_get_a_shortcut_on_a_tenants_billing_page(
    platform: Platform, browser_for: Callable[..., Any], run: JobRun
) -> None:
    # an older run and a failed one are not the latest report
    JobRun.objects.create(job="billing", date=date(2026, 10, 3), status="failed", details={})
    html = browser_for("operator").get(f"/t/{platform.tenant.namespace}/billing/").content.decode()
    shortcut = html.split('id="platform-reports"')[1].split("</p>")[0]
    assert f'href="/platform/jobs/{run.pk}/report/"' in shortcut and "Billing 2026-10-02" in shortcut
    assert "Consumer lag" not in shortcut  # no lag run has a report


@pytest.mark.parametrize("role", ["owner", "admin", "developer", "viewer", "outsider"])
def test_tenant_users_get_no_report(
    platform: Platform, browser_for: Callable[..., Any], run: JobRun, role: str
) -> None:
    client = browser_for(role)
    for suffix in ("", "index.html", "tenant_usage.png", "report.json"):
        assert client.get(f"/platform/jobs/{run.pk}/report/{suffix}").status_code == 403
    # nor a link from their billing page (the report lists every tenant)
    billing = client.get(f"/t/{platform.tenant.namespace}/billing/").content.decode()
    assert "/report/" not in billing and 'id="platform-reports"' not in billing
    anonymous = browser_for(None).get(f"/platform/jobs/{run.pk}/report/")
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


@pytest.mark.parametrize(
    "path",
    [
        "../../../secret.png",
        "..%2F..%2F..%2Fsecret.png",
        "%2e%2e/%2e%2e/%2e%2e/secret.png",
        "date=2026-10-02/../../../secret.png",
        "date=2026-10-02/../date=2026-10-01/index.html",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "leak.png",  # a symlink out of the report directory
        "parent.png",  # a symlink into another report directory
        "notes.txt",  # in the directory, but not a report file
        "sub/index.html",
        "date=2026-09-30/index.html",  # a day this run skipped
        "date=2026-09-29/index.html",  # a day this run never had
        "index.html/",
        "secret.png",
    ],
)
def test_paths_outside_the_report_are_404(
    platform: Platform, browser_for: Callable[..., Any], run: JobRun, path: str
) -> None:
    response = browser_for("operator").get(f"/platform/jobs/{run.pk}/report/{path}")
    assert response.status_code == 404


def test_runs_without_a_local_report_link_nothing(
    platform: Platform, browser_for: Callable[..., Any]
) -> None:
    failed = JobRun.objects.create(job="lag", date=date(2026, 10, 2), status="failed", details={})
    remote = JobRun.objects.create(
        job="billing",
        date=date(2026, 10, 3),
        status="succeeded",
        details={"report": "s3a://bucket/reports/billing/date=2026-10-03", "days": []},
    )
    assert reports.report_links(failed) == [] and reports.report_links(remote) == []
    operator = browser_for("operator")
    assert operator.get(f"/platform/jobs/{failed.pk}/report/").status_code == 404
    assert operator.get(f"/platform/jobs/{remote.pk}/report/").status_code == 404
    assert operator.get("/platform/jobs/999999/report/").status_code == 404
