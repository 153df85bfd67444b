"""Topic pages: list with search, detail, and the create/edit/delete forms."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import Scope, tenant_view
from console.forms import TopicEditForm, TopicForm
from console.views.common import paginate, pending, render_list
from console.views.resources import TenantResource, resource_views
from tenants.models import Topic
from tenants.services import queries, topics
from tenants.services.authz import Change

__all__ = ("TOPICS", "topic_detail", "topic_list", "topic_views")


def _form(scope: Scope, data: Any, obj: Model | None) -> TopicForm:
    return TopicEditForm(data, instance=obj) if obj is not None else TopicForm(data)


TOPICS = TenantResource(
    url_name="topic",
    label="topic",
    change=Change.TOPIC,
    model=Topic,
    lookup="name",
    form=_form,
    create=lambda actor, tenant, data: topics.create_topic(actor, tenant, **data),
    update=lambda actor, obj, changes: topics.update_topic(actor, obj, **changes),
    delete=topics.delete_topic,
    has_detail=True,
)
topic_views = resource_views(TOPICS)


@tenant_view()
def topic_list(request: HttpRequest, scope: Scope) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    page = paginate(request, queries.topics(scope.tenant, search))
    context = {"scope": scope, "page": page, "search": search, "pending": pending(page)}
    return render_list(request, "console/topics/list.html", "console/topics/_rows.html", context)


@tenant_view()
def topic_detail(request: HttpRequest, scope: Scope, key: str) -> HttpResponse:
    topic = TOPICS.get(scope, key)
    return render(
        request,
        "console/topics/detail.html",
        {"scope": scope, "topic": topic, "placements": list(topic.placements.all())},
    )
