"""Billing and usage (a tenant's invoices, daily usage and lag report, from the nightly Spark jobs)
and, for operators, the runs of those jobs."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import Scope, operator_view, tenant_view
from console.views.common import paginate
from tenants.choices import AnalyticsJob, JobRunStatus
from tenants.services import queries

__all__ = ("billing", "job_runs")

# The daily series drawn as bars; each chart's numbers are in the table beside it.
SERIES = (("messages_in", "Messages in"), ("messages_out", "Messages out"), ("bytes_in", "Bytes in"))


def _bars(rows: list[Any], field: str) -> list[dict[str, Any]]:
    """One bar per day: the value and its height as a percentage of the largest."""
    values = [int(getattr(r, field)) for r in rows]
    top = max(values, default=0) or 1
    return [
        {"date": r.date, "value": v, "pct": round(100 * v / top, 1)}
        for r, v in zip(rows, values, strict=True)
    ]


@tenant_view()
def billing(request: HttpRequest, scope: Scope) -> HttpResponse:
    days = queries.usage_days(scope.tenant)
    context = {
        "scope": scope,
        "days": days,
        "charts": [{"field": f, "label": label, "bars": _bars(days, f)} for f, label in SERIES],
        "invoices": queries.invoices(scope.tenant)[:12],
        "lag": queries.lag_days(scope.tenant),
    }
    return render(request, "console/billing.html", context)


@operator_view
def job_runs(request: HttpRequest) -> HttpResponse:
    job = request.GET.get("job", "").strip()
    status = request.GET.get("status", "").strip()
    context = {
        "page": paginate(request, queries.job_runs(job, status)),
        "filters": {"job": job, "status": status},
        "jobs": AnalyticsJob.choices,
        "statuses": JobRunStatus.choices,
    }
    return render(request, "console/platform/jobs.html", context)
