"""Members of a tenant and their roles; owners and admins manage them (only owners grant owner)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from console.access import Scope, actor_of, tenant_view
from console.actions import attempt
from console.forms import MemberAddForm, MemberRoleForm, TenantRenameForm
from tenants.models import Membership
from tenants.services import queries
from tenants.services import tenants as tenant_services
from tenants.services.authz import Change

__all__ = ("member_list", "member_remove", "member_role", "tenant_settings")


def _membership(scope: Scope, pk: str) -> Membership:
    membership = queries.owned(Membership, scope.tenant, pk=pk) if pk.isdigit() else None
    if membership is None:
        raise Http404("No such member.")
    return membership


@tenant_view()
def member_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = MemberAddForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        scope.require(Change.MEMBERSHIP)
        if form.is_valid():
            user = queries.find_user(form.cleaned_data["username"])
            if user is None:
                form.add_error("username", "No user has this name.")
            else:
                role = form.cleaned_data["role"]
                call = lambda: tenant_services.add_member(  # noqa: E731
                    actor_of(request), scope.role, scope.tenant, user, role
                )
                if attempt(form, call) is not None:
                    messages.success(request, f"{user.get_username()} is now {role} of {scope.tenant}.")
                    return redirect("console:member-list", scope.tenant.namespace)
    return render(
        request,
        "console/members.html",
        {
            "scope": scope,
            "members": queries.members(scope.tenant),
            "form": form,
            "role_form": MemberRoleForm(),
        },
        status=400 if form.is_bound and form.errors else 200,
    )


@tenant_view(Change.MEMBERSHIP)
def member_role(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    membership = _membership(scope, pk)
    form = MemberRoleForm(
        request.POST if request.method == "POST" else None, initial={"role": membership.role}
    )
    if request.method == "POST" and form.is_valid():
        role = form.cleaned_data["role"]
        call = lambda: tenant_services.change_member(actor_of(request), scope.role, membership, role)  # noqa: E731
        if attempt(form, call) is not None:
            messages.success(request, f"{membership.user} is now {role}.")
            return redirect("console:member-list", scope.tenant.namespace)
    return render(
        request,
        "console/form.html",
        {
            "scope": scope,
            "form": form,
            "title": f"Role of {membership.user}",
            "submit": "Change role",
            "cancel_url": f"/t/{scope.tenant.namespace}/members/",
        },
        status=400 if form.is_bound and form.errors else 200,
    )


@tenant_view(Change.MEMBERSHIP)
def member_remove(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    membership = _membership(scope, pk)
    form = forms.Form(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        call = lambda: tenant_services.remove_member(actor_of(request), scope.role, membership) or True  # noqa: E731
        if attempt(form, call) is not None:
            messages.success(request, f"{membership.user} was removed from {scope.tenant}.")
            return redirect("console:member-list", scope.tenant.namespace)
    return render(
        request,
        "console/confirm.html",
        {
            "scope": scope,
            "form": form,
            "title": f"Remove {membership.user} from {scope.tenant}?",
            "message": "They lose access to everything in this tenant.",
            "submit": "Remove member",
            "danger": True,
            "cancel_url": f"/t/{scope.tenant.namespace}/members/",
        },
    )


@tenant_view()
def tenant_settings(request: HttpRequest, scope: Scope) -> HttpResponse:
    """The tenant's name (owners/admins rename it); plan and cluster are shown, operators change them."""
    tenant = queries.fresh_tenant(scope.tenant.pk)
    form = TenantRenameForm(request.POST if request.method == "POST" else None, instance=tenant)
    if request.method == "POST":
        scope.require(Change.TENANT)
        if form.is_valid():
            name = form.cleaned_data["name"]
            call = lambda: tenant_services.update_tenant(actor_of(request), scope.tenant, name=name)  # noqa: E731
            if attempt(form, call) is not None:
                messages.success(request, "The tenant was renamed.")
                return redirect("console:tenant-settings", scope.tenant.namespace)
    return render(
        request,
        "console/settings.html",
        {"scope": scope, "form": form, "usage": queries.tenant_usage(scope.tenant)},
        status=400 if form.is_bound and form.errors else 200,
    )
