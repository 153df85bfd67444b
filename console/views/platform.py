"""Operator pages: the platform at a glance, tenants, plans, clusters, broker groups and nodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from console.access import actor_of, operator_view
from console.actions import attempt, changes_of
from console.forms import (
    BrokerClusterForm,
    BrokerGroupForm,
    BrokerNodeForm,
    PlanForm,
    TenantCreateForm,
    TenantEditForm,
)
from console.views.common import paginate, render_list
from tenants.models import BrokerCluster, BrokerGroup, BrokerNode, Plan, Tenant
from tenants.services import broker_status, clusters, queries
from tenants.services import tenants as tenant_services
from tenants.services.audit import Actor

__all__ = (
    "PLATFORM_RESOURCES",
    "broker_group_detail",
    "broker_group_live",
    "broker_registry",
    "plan_list",
    "platform_home",
    "platform_views",
    "tenant_list",
)


@dataclass(frozen=True, slots=True)
class PlatformResource:
    """How the console manages one kind of platform object (operators only)."""

    url_name: str
    label: str
    model: type[Model]
    create_form: type[forms.ModelForm]  # type: ignore[type-arg]
    edit_form: type[forms.ModelForm]  # type: ignore[type-arg]
    create: Callable[[Actor, dict[str, Any]], Any]
    update: Callable[[Actor, Any, dict[str, Any]], Any]
    delete: Callable[[Actor, Any], Any]
    list_url: str

    def get(self, pk: str) -> Any:
        obj = self.model._default_manager.filter(pk=pk).first() if pk.isdigit() else None
        if obj is None:
            raise Http404(f"No such {self.label}.")
        return obj


def _create_tenant(actor: Actor, data: dict[str, Any]) -> Tenant:
    owner = data.pop("owner", None)
    return tenant_services.create_tenant(actor, owner=owner, **data)


def _registry(model: type[Model]) -> Callable[[Actor, dict[str, Any]], Any]:
    return lambda actor, data: clusters.create_registry_object(actor, model(**data))  # type: ignore[arg-type]


PLATFORM_RESOURCES = {
    r.url_name: r
    for r in (
        PlatformResource(
            "tenant",
            "tenant",
            Tenant,
            TenantCreateForm,
            TenantEditForm,
            _create_tenant,
            lambda actor, obj, changes: tenant_services.update_tenant(actor, obj, **changes),
            tenant_services.delete_tenant,
            "console:platform-tenants",
        ),
        PlatformResource(
            "plan",
            "plan",
            Plan,
            PlanForm,
            PlanForm,
            lambda actor, data: tenant_services.create_plan(actor, **data),
            lambda actor, obj, changes: tenant_services.update_plan(actor, obj, **changes),
            tenant_services.delete_plan,
            "console:platform-plans",
        ),
        PlatformResource(
            "cluster",
            "broker cluster",
            BrokerCluster,
            BrokerClusterForm,
            BrokerClusterForm,
            _registry(BrokerCluster),
            clusters.update_registry_object,
            clusters.delete_registry_object,
            "console:platform-brokers",
        ),
        PlatformResource(
            "brokergroup",
            "broker group",
            BrokerGroup,
            BrokerGroupForm,
            BrokerGroupForm,
            _registry(BrokerGroup),
            clusters.update_registry_object,
            clusters.delete_registry_object,
            "console:platform-brokers",
        ),
        PlatformResource(
            "node",
            "broker node",
            BrokerNode,
            BrokerNodeForm,
            BrokerNodeForm,
            _registry(BrokerNode),
            clusters.update_registry_object,
            clusters.delete_registry_object,
            "console:platform-brokers",
        ),
    )
}


def platform_views(res: PlatformResource) -> dict[str, Callable[..., HttpResponse]]:
    """The new/edit/delete views of one platform resource."""

    def _form_page(request: HttpRequest, form: forms.BaseForm, title: str, submit: str) -> HttpResponse:
        return render(
            request,
            "console/form.html",
            {"form": form, "title": title, "submit": submit, "cancel_url": reverse(res.list_url)},
            status=400 if form.is_bound and form.errors else 200,
        )

    @operator_view
    def create(request: HttpRequest) -> HttpResponse:
        form = res.create_form(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            if "owner" in data:
                owner = data["owner"]
                data["owner"] = queries.find_user(owner) if owner else None
                if owner and data["owner"] is None:
                    form.add_error("owner", "No user has this name.")
                    return _form_page(request, form, f"New {res.label}", f"Create {res.label}")
            obj = attempt(form, lambda: res.create(actor_of(request), data))
            if obj is not None:
                messages.success(request, f"The {res.label} {obj} was created.")
                return redirect(res.list_url)
        return _form_page(request, form, f"New {res.label}", f"Create {res.label}")

    @operator_view
    def edit(request: HttpRequest, pk: str) -> HttpResponse:
        obj = res.get(pk)
        form = res.edit_form(request.POST if request.method == "POST" else None, instance=res.get(pk))
        if request.method == "POST" and form.is_valid():
            changes = changes_of(form)
            if attempt(form, lambda: res.update(actor_of(request), obj, changes) or obj) is not None:
                messages.success(request, f"The {res.label} {obj} was changed.")
                return redirect(res.list_url)
        return _form_page(request, form, f"Edit {res.label} {obj}", "Save changes")

    @operator_view
    def delete(request: HttpRequest, pk: str) -> HttpResponse:
        obj = res.get(pk)
        form = forms.Form(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            deleted = attempt(form, lambda: res.delete(actor_of(request), obj) or True)
            if deleted is not None:
                messages.success(request, f"The {res.label} {obj} was deleted.")
                return redirect(res.list_url)
        return render(
            request,
            "console/confirm.html",
            {
                "form": form,
                "object": obj,
                "title": f"Delete {res.label} {obj}?",
                "message": "Anything still using it blocks the deletion. This cannot be undone.",
                "submit": f"Delete {res.label}",
                "danger": True,
                "cancel_url": reverse(res.list_url),
            },
        )

    return {"new": create, "edit": edit, "delete": delete}


@operator_view
def platform_home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "console/platform/home.html",
        {
            "counts": queries.platform_counts(),
            "problems": queries.platform_problems(),
            "nodes": queries.broker_nodes(),
            "recent": queries.audit_events(None)[:10],
        },
    )


@operator_view
def tenant_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    page = paginate(request, queries.tenants_overview(search))
    context = {"page": page, "search": search}
    return render_list(
        request, "console/platform/tenants.html", "console/platform/_tenant_rows.html", context
    )


@operator_view
def plan_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/platform/plans.html", {"plans": queries.plans()})


@operator_view
def broker_registry(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "console/platform/brokers.html",
        {
            "clusters": queries.broker_clusters(),
            "groups": queries.broker_groups(),
            "nodes": queries.broker_nodes(),
        },
    )


def _broker_group(pk: str) -> BrokerGroup:
    group = BrokerGroup.objects.select_related("cluster").filter(pk=pk).first() if pk.isdigit() else None
    if group is None:
        raise Http404("No such broker group.")
    return group


@operator_view
def broker_group_detail(request: HttpRequest, pk: str) -> HttpResponse:
    """A broker group's nodes; their live HA and tiered-storage state loads as a fragment."""
    group = _broker_group(pk)
    return render(
        request,
        "console/platform/broker_group.html",
        {"group": group, "nodes": queries.broker_nodes().filter(group=group)},
    )


@never_cache
@operator_view
def broker_group_live(request: HttpRequest, pk: str) -> HttpResponse:
    """What every node of the group answers now (an htmx fragment the page polls)."""
    group = _broker_group(pk)
    return render(
        request,
        "console/platform/_broker_group_live.html",
        {"group": group, "states": broker_status.broker_group_status(group), "sampled_at": timezone.now()},
    )
