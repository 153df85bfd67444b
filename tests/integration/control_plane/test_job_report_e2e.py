"""Analytics run reports end to end: the Celery task runs the real billing job through spark-submit,
which writes the day's report; the console serves that report (page, PNG charts, report.json) to an
operator from the run's record, and to nobody else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenants.choices import JobRunStatus, MembershipRole
from tenants.models import JobRun, Membership, Tenant
from tenants.tasks import run_analytics_job_task
from tests.integration.analytics.test_billing import DAY, _hand_dataset
from tests.integration.analytics.test_pipeline import plans  # acme on "pro", the default plan

__all__ = ("plans",)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db]

PNG = b"\x89PNG\r\n\x1a\n"


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_operator_reads_the_report_a_real_run_wrote(settings: Any, tmp_path: Path, plans: Any) -> None:
    # given: a day of metering records and a real billing run (spark-submit, local[1])
    settings.MQ_ANALYTICS = {
        "SPARK_MASTER": "local[1]",
        "INPUT_URL": str(tmp_path / "metering"),
        "OUTPUT_URL": str(tmp_path / "analytics"),
        "LATE_DAYS": 0,
        "STUCK_MINUTES": 10,
        "TIMEOUT_S": 600.0,
    }
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    acme = Tenant.objects.get(namespace="acme")
    _hand_dataset(tmp_path / "metering")
    result = run_analytics_job_task.delay("billing", DAY).get()
    assert "job_run" in result, result.get("error", "")[-3000:]
    run = JobRun.objects.get(pk=result["job_run"])
    assert run.status == JobRunStatus.SUCCEEDED

    users = get_user_model().objects
    operator, owner = Client(), Client()
    operator.force_login(users.create_user("ops", is_staff=True))
    tenant_owner = users.create_user("olivia")
    Membership.objects.create(user=tenant_owner, tenant=acme, role=MembershipRole.OWNER)
    owner.force_login(tenant_owner)

    # when: the operator follows the job list's link
    base = f"/platform/jobs/{run.pk}/report/"
    assert f'href="{base}"' in operator.get("/platform/jobs/").content.decode()
    page = operator.get(base)
    # then: the page the job wrote, with every chart it names served beside it as a PNG
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    html = _body(page).decode()
    assert html == (Path(run.details["report"]) / "index.html").read_text()
    assert "10.14" in html  # acme's month-to-date invoice total
    summary = json.loads(_body(operator.get(f"{base}report.json")))
    assert summary["charts"] and summary["run"]["date"] == DAY
    for chart in summary["charts"]:
        assert f'<img src="{chart}"' in html
        response = operator.get(f"{base}{chart}")
        assert response["Content-Type"] == "image/png" and _body(response)[:8] == PNG

    # a tenant's owner gets none of it (the report lists every tenant), and no way out of the directory
    assert owner.get(base).status_code == 403
    assert owner.get(f"{base}{summary['charts'][0]}").status_code == 403
    assert operator.get(f"{base}../../../prices/date={DAY}/prices.jsonl").status_code == 404
    assert operator.get(f"{base}..%2F..%2F..%2Fmetering").status_code == 404
