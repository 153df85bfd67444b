"""Topic data-plane pages: queues and producers (live), message browser, message detail and trace,
and the test-message form. Everything is read from, or sent to, the brokers by ``tenants`` services."""

from __future__ import annotations

from datetime import timedelta

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from console.access import Scope, tenant_view
from console.actions import attempt, fetch
from console.dataplane_forms import MessageSearchForm, SendMessageForm
from console.rendering import BODY_VIEWS, body_view
from console.views.topics import TOPICS
from tenants.services import messages, observe
from tenants.services.authz import Change
from tenants.services.gateway_views import MessageQuery

__all__ = ("message_browser", "message_detail", "message_send", "topic_live")

DEFAULT_WINDOW = timedelta(hours=1)


@never_cache
@tenant_view()
def topic_live(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    """The topic's queues and producers right now (an htmx fragment the detail page polls)."""
    topic = TOPICS.get(scope, key)
    stats, stats_error = fetch(lambda: observe.topic_stats(topic))
    producers, producers_error = fetch(lambda: observe.topic_producers(topic))
    return render(
        request,
        "console/topics/_live.html",
        {
            "scope": scope,
            "topic": topic,
            "stats": stats,
            "produced": sum(q["max_offset"] for q in stats["queues"]) if stats else 0,
            "producers": producers or [],
            "error": stats_error or producers_error,
            "sampled_at": int(timezone.now().timestamp() * 1000),
        },
    )


@tenant_view()
def message_browser(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    topic = TOPICS.get(scope, key)
    if "mode" in request.GET:
        form = MessageSearchForm(request.GET)
    else:  # first visit: the last hour's messages
        now = timezone.now().replace(microsecond=0)
        form = MessageSearchForm({"mode": "time", "begin": now - DEFAULT_WINDOW, "end": now, "limit": 32})
    results = None
    if form.is_valid():
        query = form.to_query()
        broker = form.cleaned_data.get("broker") or None
        results = attempt(form, lambda: messages.query_messages(topic, query, broker))
    return render(
        request,
        "console/messages/browser.html",
        {"scope": scope, "topic": topic, "form": form, "results": results},
        status=400 if form.errors else 200,
    )


@tenant_view()
def message_detail(request: HttpRequest, scope: Scope, key: str, message_id: str) -> HttpResponse:
    topic = TOPICS.get(scope, key)
    found, error = fetch(lambda: messages.query_messages(topic, MessageQuery(message_id=message_id, limit=1)))
    if found is not None and not found:
        raise Http404("No broker holds this message (it may have expired).")
    message = found[0] if found else None
    trace, trace_error = fetch(lambda: messages.message_trace(topic, message_id))
    view = request.GET.get("as", "text")
    if view not in BODY_VIEWS:
        view = "text"
    return render(
        request,
        "console/messages/detail.html",
        {
            "scope": scope,
            "topic": topic,
            "message_id": message_id,
            "message": message,
            "body": body_view(message, view) if message else None,
            "view": view,
            "views": BODY_VIEWS,
            "trace": trace or [],
            "error": error or trace_error,
        },
    )


@tenant_view(Change.MESSAGES)
def message_send(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    topic = TOPICS.get(scope, key)
    form = SendMessageForm(request.POST if request.method == "POST" else None)
    sent = None
    if request.method == "POST" and form.is_valid():
        draft = form.to_draft()
        sent = attempt(form, lambda: messages.send_test_message(topic, draft))
    return render(
        request,
        "console/messages/send.html",
        {"scope": scope, "topic": topic, "form": form, "sent": sent},
        status=400 if form.is_bound and form.errors else 200,
    )
