"""Access keys: list, create and rotate (the secret is shown once, on that response), revoke."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from console.access import Scope, actor_of, tenant_view
from console.actions import attempt
from console.forms import AccessKeyForm, RotateForm
from tenants.models import AccessKey
from tenants.services import access_keys, queries
from tenants.services.authz import Change

__all__ = ("key_list", "key_new", "key_revoke", "key_rotate")


def _key(scope: Scope, pk: str) -> AccessKey:
    key = queries.owned(AccessKey, scope.tenant, pk=pk) if pk.isdigit() else None
    if key is None:
        raise Http404("No such access key.")
    return key


def _secret_page(request: HttpRequest, scope: Scope, key: AccessKey, secret: str, title: str) -> HttpResponse:
    response = render(
        request, "console/keys/secret.html", {"scope": scope, "key": key, "secret": secret, "title": title}
    )
    response["Cache-Control"] = "no-store"  # the only copy of the secret must not sit in a cache
    return response


@tenant_view()
def key_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    return render(
        request, "console/keys/list.html", {"scope": scope, "keys": queries.access_keys(scope.tenant)}
    )


@never_cache
@tenant_view(Change.ACCESS_KEY)
def key_new(request: HttpRequest, scope: Scope) -> HttpResponse:
    form = AccessKeyForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        description = form.cleaned_data["description"]
        made = attempt(
            form, lambda: access_keys.create_access_key(actor_of(request), scope.tenant, description)
        )
        if made is not None:
            return _secret_page(request, scope, made[0], made[1], "Access key created")
    return render(
        request,
        "console/form.html",
        {
            "scope": scope,
            "form": form,
            "title": "New access key",
            "intro": "The secret is shown once, right after creation. Keep it somewhere safe.",
            "submit": "Create key",
            "cancel_url": f"/t/{scope.tenant.namespace}/keys/",
        },
    )


@never_cache
@tenant_view(Change.ACCESS_KEY)
def key_rotate(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    key = _key(scope, pk)
    form = RotateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        overlap = timedelta(hours=form.cleaned_data["overlap_hours"])
        made = attempt(form, lambda: access_keys.rotate_access_key(actor_of(request), key, overlap))
        if made is not None:
            return _secret_page(request, scope, made[0], made[1], f"{key} rotated")
    return render(
        request,
        "console/confirm.html",
        {
            "scope": scope,
            "form": form,
            "object": key,
            "title": f"Rotate access key {key}?",
            "message": "A new key is issued. The old key keeps working for the overlap, then stops.",
            "submit": "Rotate key",
            "cancel_url": f"/t/{scope.tenant.namespace}/keys/",
        },
    )


@tenant_view(Change.ACCESS_KEY)
def key_revoke(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    key = _key(scope, pk)
    form = forms.Form(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        revoked = attempt(form, lambda: access_keys.revoke_access_key(actor_of(request), key))
        if revoked is not None:
            messages.success(request, f"Access key {key} is revoked; brokers refuse it from now on.")
            return redirect("console:key-list", scope.tenant.namespace)
    return render(
        request,
        "console/confirm.html",
        {
            "scope": scope,
            "form": form,
            "object": key,
            "title": f"Revoke access key {key}?",
            "message": "Clients signing with this key are refused at once. This cannot be undone.",
            "submit": "Revoke key",
            "danger": True,
            "cancel_url": f"/t/{scope.tenant.namespace}/keys/",
        },
    )
