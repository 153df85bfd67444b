"""Consumer group pages: list with search, detail, and the create/edit/delete forms."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import Scope, tenant_view
from console.forms import ConsumerGroupEditForm, ConsumerGroupForm
from console.views.common import paginate, pending, render_list
from console.views.resources import TenantResource, resource_views
from tenants.models import ConsumerGroup
from tenants.services import groups, lag_history, queries
from tenants.services.authz import Change

__all__ = ("GROUPS", "group_detail", "group_list", "group_views")


def _form(scope: Scope, data: Any, obj: Model | None) -> ConsumerGroupForm:
    return ConsumerGroupEditForm(data, instance=obj) if obj is not None else ConsumerGroupForm(data)


GROUPS = TenantResource(
    url_name="group",
    label="consumer group",
    change=Change.CONSUMER_GROUP,
    model=ConsumerGroup,
    lookup="name",
    form=_form,
    create=lambda actor, tenant, data: groups.create_group(actor, tenant, **data),
    update=lambda actor, obj, changes: groups.update_group(actor, obj, **changes),
    delete=groups.delete_group,
    has_detail=True,
)
group_views = resource_views(GROUPS)


@tenant_view()
def group_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    page = paginate(request, queries.consumer_groups(scope.tenant, search))
    context = {"scope": scope, "page": page, "search": search, "pending": pending(page)}
    return render_list(request, "console/groups/list.html", "console/groups/_rows.html", context)


@tenant_view()
def group_detail(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    group = GROUPS.get(scope, key)
    span = request.GET.get("range", "24h")
    if span not in lag_history.HISTORY_RANGES:
        span = "24h"
    points = lag_history.lag_history(group, lag_history.HISTORY_RANGES[span])
    chart = {
        "labels": [p.at.strftime("%m-%d %H:%M") for p in points],
        "values": [p.lag for p in points],
    }
    context = {
        "scope": scope,
        "group": group,
        "history": points,
        "history_chart": chart,
        "history_range": span,
        "history_ranges": list(lag_history.HISTORY_RANGES),
    }
    return render(request, "console/groups/detail.html", context)
