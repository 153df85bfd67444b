"""Consumer group data-plane pages: lag and connected consumers (live), offset reset, dead letters
and their re-drive; and the overview's most-lagging groups. Services do the work; they audit resets
and re-drives."""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from console.access import Scope, actor_of, tenant_view
from console.actions import attempt, fetch
from console.dataplane_forms import RedriveForm, ResetOffsetForm
from console.rendering import body_view
from console.views.groups import GROUPS
from tenants.models import Topic
from tenants.services import messages, observe, queries
from tenants.services.authz import Change

__all__ = ("group_dlq", "group_live", "group_reset", "overview_lag")

DLQ_PAGE = 100
OVERVIEW_GROUPS = 20  # groups asked for their lag on the overview; each is a round trip per broker
TOP_LAGGING = 5


@never_cache
@tenant_view()
def group_live(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    """The group's lag per queue and its connected consumers (an htmx fragment the page polls)."""
    group = GROUPS.get(scope, key)
    lag, lag_error = fetch(lambda: observe.group_lag(group))
    clients, clients_error = fetch(lambda: observe.group_clients(group))
    return render(
        request,
        "console/groups/_live.html",
        {
            "scope": scope,
            "group": group,
            "lag": lag,
            "consumed": sum(q["committed_offset"] for q in lag["queues"]) if lag else 0,
            "clients": clients or [],
            "error": lag_error or clients_error,
            "sampled_at": int(timezone.now().timestamp() * 1000),
        },
    )


@tenant_view(Change.MESSAGES)
def group_reset(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    group = GROUPS.get(scope, key)
    names = [t.name for t in queries.topics(scope.tenant)]
    form = ResetOffsetForm(request.POST if request.method == "POST" else None, topic_names=names)
    done = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        topic = queries.owned(Topic, scope.tenant, name=d["topic"])
        if topic is None:  # deleted since the form was shown
            form.add_error("topic", "No such topic.")
        else:
            target = topic
            done = attempt(
                form, lambda: messages.reset_offset(actor_of(request), group, target, d["to"], form.time_ms)
            )
    return render(
        request,
        "console/groups/reset.html",
        {"scope": scope, "group": group, "form": form, "done": done},
        status=400 if form.is_bound and form.errors else 200,
    )


@tenant_view()
def group_dlq(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    group = GROUPS.get(scope, key)
    form = RedriveForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        scope.require(Change.MESSAGES)
        if form.is_valid():
            d = form.cleaned_data
            count = attempt(
                form,
                lambda: messages.redrive_dead_letters(actor_of(request), group, d["message_ids"], d["all"]),
            )
            if count is not None:
                flash.success(request, f"{count} dead letter(s) sent back to their topic for {group.name}.")
                return redirect("console:dlq-list", scope.tenant.namespace, group.name)
    letters, error = fetch(lambda: messages.list_dead_letters(group, DLQ_PAGE))
    rows: list[dict[str, Any]] = [{**m, "preview": body_view(m, "text").text[:120]} for m in (letters or [])]
    return render(
        request,
        "console/groups/dlq.html",
        {"scope": scope, "group": group, "letters": rows, "error": error, "form": form},
        status=400 if form.is_bound and form.errors else 200,
    )


@never_cache
@tenant_view()
def overview_lag(request: HttpRequest, scope: Scope) -> HttpResponse:
    """The groups with the highest lag (an htmx fragment of the overview)."""
    rows, errors = [], []
    for group in queries.consumer_groups(scope.tenant)[:OVERVIEW_GROUPS]:
        lag, error = fetch(lambda g=group: observe.group_lag(g))  # type: ignore[misc]
        if lag is None:
            errors.append(f"{group.name}: {error}")
            continue
        worst_ms = max((q["lag_ms"] for q in lag["queues"]), default=0)
        rows.append({"group": group, "total_lag": lag["total_lag"], "lag_ms": worst_ms})
    rows.sort(key=lambda r: r["total_lag"], reverse=True)
    return render(
        request,
        "console/_overview_lag.html",
        {"scope": scope, "rows": rows[:TOP_LAGGING], "errors": errors[:3], "sampled_at": timezone.now()},
    )
