"""Billing and usage (a tenant's invoices, daily usage and lag report, from the nightly Spark jobs)
and, for operators, the runs of those jobs."""

from __future__ import annotations

from typing import Any

from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render

from console.access import Scope, operator_view, tenant_view
from console.views.common import paginate
from tenants.choices import AnalyticsJob, JobRunStatus
from tenants.models import JobRun
from tenants.services import queries, reports

__all__ = ("billing", "job_report", "job_runs")

# The report page is static HTML with inline styles and charts beside it: nothing else may load.
REPORT_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'self'"

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
        # the run reports cover every tenant: a shortcut for operators only
        "platform_reports": reports.latest_reports() if scope.operator else [],
    }
    return render(request, "console/billing.html", context)


@operator_view
def job_runs(request: HttpRequest) -> HttpResponse:
    job = request.GET.get("job", "").strip()
    status = request.GET.get("status", "").strip()
    page = paginate(request, queries.job_runs(job, status))
    context = {
        "page": page,
        "rows": [(run, reports.report_links(run)) for run in page],
        "filters": {"job": job, "status": status},
        "jobs": AnalyticsJob.choices,
        "statuses": JobRunStatus.choices,
    }
    return render(request, "console/platform/jobs.html", context)


@operator_view
def job_report(request: HttpRequest, pk: int, path: str = "") -> HttpResponseBase:
    """A file of a run's report (its page, charts or report.json); anything else is 404."""
    found = reports.report_file(get_object_or_404(JobRun, pk=pk), path)
    if found is None:
        raise Http404("No such report file.")
    response = FileResponse(found.path.open("rb"), content_type=found.content_type)
    response["Content-Security-Policy"] = REPORT_CSP
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-cache"
    return response
