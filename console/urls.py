"""Console routes: tenant pages under /t/<namespace>/, operator pages under /platform/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path

from console.views import (
    acls,
    alerts,
    audit,
    billing,
    consumers,
    groups,
    home,
    keys,
    members,
    messages,
    platform,
    quotas,
    topics,
)

app_name = "console"

NAME = "<str:key>"  # topic and group names: letters, digits, '-', '_'
PK = "<str:key>"


def _crud(prefix: str, url_name: str, views: dict[str, Callable[..., Any]], key: str) -> list[URLPattern]:
    return [
        path(f"t/<slug:namespace>/{prefix}/new/", views["new"], name=f"{url_name}-new"),
        path(f"t/<slug:namespace>/{prefix}/{key}/edit/", views["edit"], name=f"{url_name}-edit"),
        path(f"t/<slug:namespace>/{prefix}/{key}/delete/", views["delete"], name=f"{url_name}-delete"),
    ]


def _platform_crud(prefix: str, url_name: str) -> list[URLPattern]:
    views = platform.platform_views(platform.PLATFORM_RESOURCES[url_name])
    return [
        path(f"platform/{prefix}/new/", views["new"], name=f"{url_name}-new"),
        path(f"platform/{prefix}/<str:pk>/edit/", views["edit"], name=f"{url_name}-edit"),
        path(f"platform/{prefix}/<str:pk>/delete/", views["delete"], name=f"{url_name}-delete"),
    ]


urlpatterns = [
    path("", home.home, name="home"),
    path("switch/", home.switch_tenant, name="switch"),
    # tenant pages
    path("t/<slug:namespace>/", home.overview, name="overview"),
    path("t/<slug:namespace>/overview/lag/", consumers.overview_lag, name="overview-lag"),
    path("t/<slug:namespace>/overview/storage/", home.overview_storage, name="overview-storage"),
    path("t/<slug:namespace>/topics/", topics.topic_list, name="topic-list"),
    *_crud("topics", "topic", topics.topic_views, NAME),
    path(f"t/<slug:namespace>/topics/{NAME}/", topics.topic_detail, name="topic-detail"),
    path(f"t/<slug:namespace>/topics/{NAME}/live/", messages.topic_live, name="topic-live"),
    path(f"t/<slug:namespace>/topics/{NAME}/messages/", messages.message_browser, name="message-browser"),
    path(
        f"t/<slug:namespace>/topics/{NAME}/messages/<str:message_id>/",
        messages.message_detail,
        name="message-detail",
    ),
    path(f"t/<slug:namespace>/topics/{NAME}/send/", messages.message_send, name="message-send"),
    path("t/<slug:namespace>/groups/", groups.group_list, name="group-list"),
    *_crud("groups", "group", groups.group_views, NAME),
    path(f"t/<slug:namespace>/groups/{NAME}/", groups.group_detail, name="group-detail"),
    path(f"t/<slug:namespace>/groups/{NAME}/live/", consumers.group_live, name="group-live"),
    path(f"t/<slug:namespace>/groups/{NAME}/reset/", consumers.group_reset, name="group-reset"),
    path(f"t/<slug:namespace>/groups/{NAME}/dlq/", consumers.group_dlq, name="dlq-list"),
    path("t/<slug:namespace>/keys/", keys.key_list, name="key-list"),
    path("t/<slug:namespace>/keys/new/", keys.key_new, name="key-new"),
    path("t/<slug:namespace>/keys/<str:pk>/rotate/", keys.key_rotate, name="key-rotate"),
    path("t/<slug:namespace>/keys/<str:pk>/revoke/", keys.key_revoke, name="key-revoke"),
    path("t/<slug:namespace>/acls/", acls.acl_list, name="acl-list"),
    *_crud("acls", "acl", acls.acl_views, PK),
    path("t/<slug:namespace>/quotas/", quotas.quota_list, name="quota-list"),
    *_crud("quotas", "quota", quotas.quota_views, PK),
    path("t/<slug:namespace>/members/", members.member_list, name="member-list"),
    path("t/<slug:namespace>/members/<str:pk>/role/", members.member_role, name="member-role"),
    path("t/<slug:namespace>/members/<str:pk>/remove/", members.member_remove, name="member-remove"),
    path("t/<slug:namespace>/settings/", members.tenant_settings, name="tenant-settings"),
    path("t/<slug:namespace>/audit/", audit.tenant_audit, name="tenant-audit"),
    path("t/<slug:namespace>/billing/", billing.billing, name="billing"),
    path("t/<slug:namespace>/alerts/", alerts.alert_list, name="alert-list"),
    path("t/<slug:namespace>/alerts/new/", alerts.alert_new, name="alert-new"),
    path("t/<slug:namespace>/alerts/<str:pk>/edit/", alerts.alert_edit, name="alert-edit"),
    path("t/<slug:namespace>/alerts/<str:pk>/delete/", alerts.alert_delete, name="alert-delete"),
    path("t/<slug:namespace>/alerts/<str:pk>/test/", alerts.alert_test, name="alert-test"),
    path("t/<slug:namespace>/alerts/<str:pk>/secret/", alerts.alert_secret, name="alert-secret"),
    path(
        "t/<slug:namespace>/alerts/<str:pk>/secret/rotate/",
        alerts.alert_secret_rotate,
        name="alert-secret-rotate",
    ),
    # operator pages
    path("platform/", platform.platform_home, name="platform"),
    path("platform/tenants/", platform.tenant_list, name="platform-tenants"),
    *_platform_crud("tenants", "tenant"),
    path("platform/plans/", platform.plan_list, name="platform-plans"),
    *_platform_crud("plans", "plan"),
    path("platform/brokers/", platform.broker_registry, name="platform-brokers"),
    *_platform_crud("clusters", "cluster"),
    *_platform_crud("broker-groups", "brokergroup"),
    path("platform/broker-groups/<str:pk>/", platform.broker_group_detail, name="brokergroup-detail"),
    path("platform/broker-groups/<str:pk>/live/", platform.broker_group_live, name="brokergroup-live"),
    *_platform_crud("nodes", "node"),
    path("platform/audit/", audit.platform_audit, name="platform-audit"),
    path("platform/jobs/", billing.job_runs, name="platform-jobs"),
    # a run's report: index.html with its charts beside it, so relative links resolve under report/
    path("platform/jobs/<int:pk>/report/", billing.job_report, name="job-report"),
    path("platform/jobs/<int:pk>/report/<path:path>", billing.job_report, name="job-report-file"),
]
