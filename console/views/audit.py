"""The audit log of a tenant, and of the whole platform for operators."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from console.access import Scope, operator_view, tenant_view
from console.views.common import paginate, render_list
from tenants.choices import AuditAction
from tenants.models import Tenant
from tenants.services import queries

__all__ = ("platform_audit", "tenant_audit")


def _audit(request: HttpRequest, tenant: Tenant | None, scope: Scope | None) -> HttpResponse:
    filters = {
        "action": request.GET.get("action", "").strip(),
        "object_type": request.GET.get("object_type", "").strip(),
        "search": request.GET.get("q", "").strip(),
    }
    page = paginate(request, queries.audit_events(tenant, **filters))
    context = {
        "scope": scope,
        "page": page,
        "filters": filters,
        "actions": AuditAction.choices,
        "platform": tenant is None,
    }
    return render_list(request, "console/audit.html", "console/_audit_rows.html", context)


@tenant_view()
def tenant_audit(request: HttpRequest, scope: Scope) -> HttpResponse:
    return _audit(request, scope.tenant, scope)


@operator_view
def platform_audit(request: HttpRequest) -> HttpResponse:
    return _audit(request, None, None)
