"""Create, edit and delete pages shared by every provisioned, tenant-owned resource.

Each resource declares its form and its three services; these views validate the form, call the
service through ``attempt`` (domain errors land on the form, which keeps what was typed), and
redirect with a message. The services own every rule.
"""

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

from console.access import Scope, actor_of, tenant_view
from console.actions import attempt, changes_of
from tenants.choices import ProvisioningStatus
from tenants.services import queries
from tenants.services.audit import Actor
from tenants.services.authz import Change

__all__ = ("TenantResource", "resource_views")

FormFactory = Callable[[Scope, Any, Model | None], forms.BaseForm]


@dataclass(frozen=True, slots=True)
class TenantResource:
    """How the console manages one kind of provisioned object of a tenant."""

    url_name: str  # "topic" -> console:topic-list, topic-new, topic-detail, ...
    label: str  # "topic", for headings and messages
    change: Change
    model: type[Model]
    lookup: str  # URL key field: "name" or "pk"
    form: FormFactory  # (scope, POST data or None, object being edited or None)
    create: Callable[[Actor, Any, dict[str, Any]], Any]
    update: Callable[[Actor, Any, dict[str, Any]], Any]
    delete: Callable[[Actor, Any], Any]
    has_detail: bool = False

    def get(self, scope: Scope, key: str) -> Any:
        if self.lookup == "pk" and not key.isdigit():
            raise Http404
        obj = queries.owned(self.model, scope.tenant, **{self.lookup: key})
        if obj is None:
            raise Http404(f"No such {self.label}.")
        return obj

    def refetch(self, scope: Scope, obj: Any) -> Any:
        # A ModelForm writes cleaned values into its instance; the service must see the original.
        return queries.owned(self.model, scope.tenant, pk=obj.pk)

    def key_of(self, obj: Any) -> str:
        return str(getattr(obj, self.lookup))

    def url(self, scope: Scope, action: str, obj: Any = None) -> str:
        args = [scope.tenant.namespace] + ([self.key_of(obj)] if obj is not None else [])
        return reverse(f"console:{self.url_name}-{action}", args=args)

    def after_save(self, scope: Scope, obj: Any) -> str:
        return self.url(scope, "detail", obj) if self.has_detail else self.url(scope, "list")


def resource_views(res: TenantResource) -> dict[str, Callable[..., HttpResponse]]:
    """The new/edit/delete views of one resource, keyed by action."""

    @tenant_view(res.change)
    def create(request: HttpRequest, scope: Scope) -> HttpResponse:
        form = res.form(scope, request.POST if request.method == "POST" else None, None)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            obj = attempt(form, lambda: res.create(actor_of(request), scope.tenant, data))
            if obj is not None:
                messages.success(request, f"The {res.label} {obj} was created; it is being provisioned.")
                return redirect(res.after_save(scope, obj))
        return render(
            request,
            "console/form.html",
            {
                "scope": scope,
                "form": form,
                "title": f"New {res.label}",
                "submit": f"Create {res.label}",
                "cancel_url": res.url(scope, "list"),
            },
            status=400 if form.is_bound and form.errors else 200,
        )

    @tenant_view(res.change)
    def edit(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
        obj = res.get(scope, key)
        if obj.status == ProvisioningStatus.DELETING:
            messages.error(request, f"The {res.label} {obj} is being deleted; it cannot change.")
            return redirect(res.url(scope, "list"))
        form = res.form(scope, request.POST if request.method == "POST" else None, res.refetch(scope, obj))
        if request.method == "POST" and form.is_valid():
            changes = changes_of(form)
            if not changes:
                messages.info(request, "Nothing changed.")
                return redirect(res.after_save(scope, obj))
            saved = attempt(form, lambda: res.update(actor_of(request), obj, changes))
            if saved is not None:
                messages.success(
                    request, f"The {res.label} {obj} was changed; the brokers are being updated."
                )
                return redirect(res.after_save(scope, obj))
        return render(
            request,
            "console/form.html",
            {
                "scope": scope,
                "form": form,
                "object": obj,
                "title": f"Edit {res.label} {obj}",
                "submit": "Save changes",
                "cancel_url": res.after_save(scope, obj),
            },
            status=400 if form.is_bound and form.errors else 200,
        )

    @tenant_view(res.change)
    def delete(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
        obj = res.get(scope, key)
        form = forms.Form(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            done = attempt(form, lambda: res.delete(actor_of(request), obj) or obj)
            if done is not None:
                messages.success(request, f"The {res.label} {obj} is being deleted from the brokers.")
                return redirect(res.url(scope, "list"))
        return render(
            request,
            "console/confirm.html",
            {
                "scope": scope,
                "form": form,
                "object": obj,
                "title": f"Delete {res.label} {obj}?",
                "message": f"The {res.label} is removed from every broker. This cannot be undone.",
                "submit": f"Delete {res.label}",
                "danger": True,
                "cancel_url": res.after_save(scope, obj),
            },
        )

    return {"new": create, "edit": edit, "delete": delete}
