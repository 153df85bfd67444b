"""Alert rules of a tenant: the list with the alerts they fired, and the create/edit/delete forms.

The form validates what it can show per field; the ``tenants.services.alerts`` functions decide and
audit. Viewers see the page without the write controls; their hand-made requests are 403.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.access import Scope, actor_of, tenant_view
from console.actions import attempt, changes_of
from console.forms import AlertRuleForm
from tenants.choices import AlertChannel
from tenants.errors import ControlPlaneError
from tenants.models import AlertRule
from tenants.services import alerts, queries
from tenants.services.authz import Change

__all__ = (
    "alert_delete",
    "alert_edit",
    "alert_list",
    "alert_new",
    "alert_secret",
    "alert_secret_rotate",
    "alert_test",
)

RECENT_EVENTS = 50


def _rule(scope: Scope, pk: str) -> AlertRule:
    rule = queries.owned(AlertRule, scope.tenant, pk=pk) if pk.isdigit() else None
    if rule is None:
        raise Http404("No such alert rule.")
    return rule


def _list_url(scope: Scope) -> str:
    return reverse("console:alert-list", args=[scope.tenant.namespace])


def _form_page(
    request: HttpRequest, scope: Scope, form: AlertRuleForm, title: str, submit: str
) -> HttpResponse:
    return render(
        request,
        "console/form.html",
        {
            "scope": scope,
            "form": form,
            "title": title,
            "intro": "Checked every minute against the brokers' figures; you are notified when a "
            "threshold is reached, and again every hour while it stays reached.",
            "submit": submit,
            "cancel_url": _list_url(scope),
        },
        status=400 if form.is_bound and form.errors else 200,
    )


@tenant_view()
def alert_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    return render(
        request,
        "console/alerts/list.html",
        {
            "scope": scope,
            "rules": alerts.alert_rules(scope.tenant),
            "events": alerts.alert_events(scope.tenant)[:RECENT_EVENTS],
            "has_groups": queries.consumer_groups(scope.tenant).exists(),
        },
    )


@tenant_view(Change.ALERT_RULE)
def alert_new(request: HttpRequest, scope: Scope) -> HttpResponse:
    initial = {"group": request.GET.get("group")} if request.GET.get("group", "").isdigit() else None
    data = request.POST if request.method == "POST" else None
    form = AlertRuleForm(data, tenant=scope.tenant, initial=initial)
    if request.method == "POST" and form.is_valid():
        fields = {name: form.cleaned_data[name] for name in form.Meta.fields}
        rule = attempt(form, lambda: alerts.create_alert_rule(actor_of(request), scope.tenant, **fields))
        if rule is not None:
            messages.success(request, f"The alert rule {rule} was created; it is checked every minute.")
            if rule.channel == AlertChannel.WEBHOOK:  # the receiver needs the secret to verify calls
                return redirect("console:alert-secret", scope.tenant.namespace, rule.pk)
            return redirect(_list_url(scope))
    return _form_page(request, scope, form, "New alert rule", "Create alert rule")


@tenant_view(Change.ALERT_RULE)
def alert_edit(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    rule = _rule(scope, pk)
    # the form writes into its own copy: the service compares against the stored rule
    form = AlertRuleForm(
        request.POST if request.method == "POST" else None, instance=_rule(scope, pk), tenant=scope.tenant
    )
    if request.method == "POST" and form.is_valid():
        changes = changes_of(form)
        if not changes:
            messages.info(request, "Nothing changed.")
            return redirect(_list_url(scope))
        if attempt(form, lambda: alerts.update_alert_rule(actor_of(request), rule, **changes)) is not None:
            messages.success(request, f"The alert rule {rule} was changed.")
            return redirect(_list_url(scope))
    return _form_page(request, scope, form, f"Edit alert rule {rule}", "Save changes")


@tenant_view(Change.ALERT_RULE)
def alert_delete(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    rule = _rule(scope, pk)
    form = forms.Form(request.POST if request.method == "POST" else None)
    deleted = (
        request.method == "POST"
        and form.is_valid()
        and attempt(form, lambda: alerts.delete_alert_rule(actor_of(request), rule)) is not None
    )
    if deleted:
        messages.success(request, f"The alert rule {rule} was deleted.")
        return redirect(_list_url(scope))
    return render(
        request,
        "console/confirm.html",
        {
            "scope": scope,
            "form": form,
            "object": rule,
            "title": f"Delete alert rule {rule}?",
            "message": "No more notifications come from it; the alerts it fired stay in the history.",
            "submit": "Delete alert rule",
            "danger": True,
            "cancel_url": _list_url(scope),
        },
    )


@require_POST
@tenant_view(Change.ALERT_RULE)
def alert_test(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    """Send the rule's test notification now; the outcome comes back as a message on the list."""
    rule = _rule(scope, pk)
    try:
        error = alerts.send_test_notification(rule)
    except ControlPlaneError as exc:
        error = exc.message
    if error:
        messages.error(request, f"The test notification of {rule} was not delivered: {error}")
    else:
        messages.success(request, f"A test notification of {rule} was sent to {rule.target}.")
    return redirect(_list_url(scope))


def _secret_page(
    request: HttpRequest, scope: Scope, rule: AlertRule, secret: str, rotated: bool, error: str = ""
) -> HttpResponse:
    context = {
        "scope": scope,
        "rule": rule,
        "secret": secret,
        "rotated": rotated,
        "error": error,
        "list_url": _list_url(scope),
    }
    response = render(request, "console/alerts/secret.html", context, status=409 if error else 200)
    response["Cache-Control"] = "no-store"  # a secret must not sit in a browser or proxy cache
    return response


@tenant_view(Change.ALERT_RULE)
def alert_secret(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    """The rule's webhook signing secret, for those who may change the rule (viewers: 403)."""
    rule = _rule(scope, pk)
    try:
        secret = alerts.signing_secret(rule)
    except ControlPlaneError as exc:  # undecryptable after a key change: rotating is the way out
        return _secret_page(request, scope, rule, "", rotated=False, error=exc.message)
    return _secret_page(request, scope, rule, secret, rotated=False)


@tenant_view(Change.ALERT_RULE)
def alert_secret_rotate(request: HttpRequest, scope: Scope, pk: str) -> HttpResponse:
    """Confirm, then a new signing secret (audited); webhooks are signed with it from now on."""
    rule = _rule(scope, pk)
    form = forms.Form(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        secret = alerts.rotate_signing_secret(actor_of(request), rule)
        return _secret_page(request, scope, rule, secret, rotated=True)
    return render(
        request,
        "console/confirm.html",
        {
            "scope": scope,
            "form": form,
            "object": rule,
            "title": f"Rotate the signing secret of {rule}?",
            "message": "The current secret stops signing at once: webhook calls fail your receiver's "
            "check until it has the new one.",
            "submit": "Rotate secret",
            "danger": True,
            "cancel_url": reverse("console:alert-secret", args=[scope.tenant.namespace, rule.pk]),
        },
    )
