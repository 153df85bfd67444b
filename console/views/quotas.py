"""Quotas: the limits in force, usage against them, and the overrides (operators set those)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import Scope, tenant_view
from console.forms import QuotaForm
from console.views.resources import TenantResource, resource_views
from tenants.constants import QUOTA_LIMIT_FIELDS
from tenants.models import Quota
from tenants.services import queries, quotas
from tenants.services.authz import Change

__all__ = ("QUOTAS", "quota_list", "quota_views")


def _form(scope: Scope, data: Any, obj: Model | None) -> QuotaForm:
    return QuotaForm(data, instance=obj, tenant=scope.tenant, editing=obj is not None)


QUOTAS = TenantResource(
    url_name="quota",
    label="quota",
    change=Change.QUOTA,
    model=Quota,
    lookup="pk",
    form=_form,
    create=lambda actor, tenant, data: quotas.create_quota(actor, tenant, **data),
    update=lambda actor, obj, changes: quotas.update_quota(actor, obj, **changes),
    delete=quotas.delete_quota,
)
quota_views = resource_views(QUOTAS)


@tenant_view()
def quota_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    usage = queries.tenant_usage(scope.tenant)
    limits = [(name, name.replace("_", " ").capitalize(), usage.limits[name]) for name in QUOTA_LIMIT_FIELDS]
    return render(
        request,
        "console/quotas.html",
        {
            "scope": scope,
            "usage": usage,
            "limits": limits,
            "overrides": queries.quotas(scope.tenant),
            "limit_fields": QUOTA_LIMIT_FIELDS,
        },
    )
