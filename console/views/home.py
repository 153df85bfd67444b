"""Landing, tenant switcher and the tenant overview."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.cache import never_cache

from console.access import SESSION_TENANT, Scope, tenant_view
from tenants.services import alerts, authz, queries, storage

__all__ = ("SWITCHABLE_SECTIONS", "home", "overview", "overview_storage", "switch_tenant")

# Pages that exist in every tenant: switching tenants keeps you on the same kind of page.
SWITCHABLE_SECTIONS = frozenset(
    {
        "overview",
        "topic-list",
        "group-list",
        "key-list",
        "acl-list",
        "quota-list",
        "member-list",
        "tenant-audit",
        "tenant-settings",
        "alert-list",
    }
)


def home(request: HttpRequest) -> HttpResponse:
    """Go to the last tenant looked at, else the first one; operators without tenants go to the platform."""
    if not request.user.is_authenticated:
        return redirect(f"{reverse('login')}?next=/")
    tenants = authz.visible_tenants(request.user)
    last = request.session.get(SESSION_TENANT)
    tenant = (tenants.filter(namespace=last).first() if last else None) or tenants.first()
    if tenant is not None:
        return redirect("console:overview", tenant.namespace)
    if authz.is_operator(request.user):
        return redirect("console:platform")
    return render(request, "console/no_tenant.html")


def switch_tenant(request: HttpRequest) -> HttpResponse:
    """The tenant switcher's target (a plain GET form, so it works without JavaScript)."""
    namespace = request.GET.get("tenant", "")
    section = request.GET.get("section", "overview")
    if section not in SWITCHABLE_SECTIONS:
        section = "overview"
    if not namespace:
        return redirect("console:home")
    try:
        return redirect(f"console:{section}", namespace)
    except NoReverseMatch:
        return redirect("console:home")


@tenant_view()
def overview(request: HttpRequest, scope: Scope) -> HttpResponse:
    usage = queries.tenant_usage(scope.tenant)
    return render(
        request,
        "console/overview.html",
        {
            "scope": scope,
            "usage": usage,
            "problems": queries.tenant_problems(scope.tenant, usage),
            "fired": alerts.recent_alerts(scope.tenant),
            "recent": queries.audit_events(scope.tenant)[:8],
        },
    )


@never_cache
@tenant_view()
def overview_storage(request: HttpRequest, scope: Scope) -> HttpResponse:
    """Storage held on the brokers against the quota (an htmx fragment of the overview)."""
    return render(
        request,
        "console/_overview_storage.html",
        {"scope": scope, "storage": storage.tenant_storage(scope.tenant)},
    )
