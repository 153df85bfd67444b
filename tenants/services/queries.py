"""Read-side queries for presentation layers (the console): what a tenant holds and uses.

Only reads live here; every change goes through the other service modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.db.models import Count, Model, Q, QuerySet

from tenants.choices import AccessKeyStatus, BrokerHealth, ProvisioningStatus
from tenants.models import (
    AccessKey,
    AclPolicy,
    AuditEvent,
    BrokerCluster,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    Invoice,
    JobRun,
    LagDaily,
    Membership,
    Plan,
    Quota,
    Tenant,
    Topic,
    UsageDaily,
)
from tenants.services.limits import effective_limits

__all__ = (
    "Problem",
    "TenantUsage",
    "access_keys",
    "acl_policies",
    "audit_events",
    "broker_clusters",
    "broker_groups",
    "broker_nodes",
    "consumer_groups",
    "find_user",
    "fresh_tenant",
    "invoices",
    "job_runs",
    "lag_days",
    "members",
    "owned",
    "plans",
    "platform_counts",
    "platform_problems",
    "quotas",
    "tenant_problems",
    "tenant_usage",
    "tenants_overview",
    "topics",
    "usage_days",
)

M = TypeVar("M", bound=Model)


def owned(model: type[M], tenant: Tenant, **lookup: Any) -> M | None:
    """One object of the tenant (by pk or name); None when it does not exist *in this tenant*."""
    return model._default_manager.filter(tenant=tenant, **lookup).first()  # type: ignore[misc]


def topics(tenant: Tenant, search: str = "") -> QuerySet[Topic, Any]:
    qs = Topic.objects.filter(tenant=tenant).prefetch_related("placements__broker_group")
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return qs.order_by("name")


def consumer_groups(tenant: Tenant, search: str = "") -> QuerySet[ConsumerGroup, Any]:
    qs = ConsumerGroup.objects.filter(tenant=tenant)
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return qs.order_by("name")


def access_keys(tenant: Tenant) -> QuerySet[AccessKey, Any]:
    return AccessKey.objects.filter(tenant=tenant).select_related("rotated_from").order_by("-created")


def acl_policies(tenant: Tenant) -> QuerySet[AclPolicy, Any]:
    return AclPolicy.objects.filter(tenant=tenant)


def quotas(tenant: Tenant) -> QuerySet[Quota, Any]:
    return Quota.objects.filter(tenant=tenant).select_related("topic", "group")


def members(tenant: Tenant) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username")


def find_user(username: str) -> Any:
    """The user with this username, or None."""
    return get_user_model().objects.filter(username=username).first()


def audit_events(
    tenant: Tenant | None, *, action: str = "", object_type: str = "", search: str = ""
) -> QuerySet[AuditEvent, Any]:
    """Audit events of one tenant (or of the whole platform with ``tenant=None``), newest first."""
    qs = AuditEvent.objects.all() if tenant is None else AuditEvent.objects.filter(tenant=tenant)
    if action:
        qs = qs.filter(action=action)
    if object_type:
        qs = qs.filter(object_type=object_type)
    if search:
        qs = qs.filter(
            Q(object_repr__icontains=search) | Q(actor_name__icontains=search) | Q(object_id=search)
        )
    return qs.order_by("-created", "-id")


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """What a tenant holds against the limits in force (plan overlaid by its quota)."""

    limits: dict[str, int]
    topic_count: int
    group_count: int
    key_count: int
    acl_count: int

    def percent(self, used: int, limit_name: str) -> int:
        limit = self.limits.get(limit_name, 0)
        return 100 if limit <= 0 else min(100, round(100 * used / limit))

    @property
    def topics_percent(self) -> int:
        return self.percent(self.topic_count, "max_topics")

    @property
    def groups_percent(self) -> int:
        return self.percent(self.group_count, "max_groups")


def tenant_usage(tenant: Tenant) -> TenantUsage:
    return TenantUsage(
        limits=effective_limits(tenant),
        topic_count=Topic.objects.filter(tenant=tenant).count(),
        group_count=ConsumerGroup.objects.filter(tenant=tenant).count(),
        key_count=AccessKey.objects.filter(tenant=tenant, key_status=AccessKeyStatus.ACTIVE).count(),
        acl_count=AclPolicy.objects.filter(tenant=tenant).count(),
    )


@dataclass(frozen=True, slots=True)
class Problem:
    """Something that needs a person's attention (shown as an alert)."""

    severity: str  # "error" or "warning"
    what: str
    message: str


def tenant_problems(tenant: Tenant, usage: TenantUsage | None = None) -> list[Problem]:
    """Resources the brokers refused, and limits nearly reached."""
    found: list[Problem] = []
    for model, label in ((Topic, "topic"), (ConsumerGroup, "group"), (AccessKey, "key"), (AclPolicy, "ACL")):
        for obj in model._default_manager.filter(tenant=tenant, status=ProvisioningStatus.ERROR)[:20]:
            found.append(Problem("error", f"{label} {obj}", obj.status_message or "provisioning failed"))
    usage = usage or tenant_usage(tenant)
    for used, name, label in (
        (usage.topic_count, "max_topics", "topics"),
        (usage.group_count, "max_groups", "consumer groups"),
    ):
        if usage.limits[name] and used >= 0.8 * usage.limits[name]:
            found.append(Problem("warning", label, f"{used} of {usage.limits[name]} allowed by the quota"))
    return found


def platform_problems() -> list[Problem]:
    """Brokers that do not answer, and resources stuck in error anywhere."""
    found = [
        Problem("error", f"broker {node.name}", node.health_message or "unreachable")
        for node in BrokerNode.objects.filter(enabled=True, health=BrokerHealth.UNREACHABLE)
    ]
    for model in (Topic, ConsumerGroup, AccessKey, AclPolicy, Quota):
        errors = model._default_manager.filter(status=ProvisioningStatus.ERROR).count()  # type: ignore[misc]
        if errors:
            found.append(Problem("error", str(model._meta.verbose_name_plural), f"{errors} in error"))
    return found


def tenants_overview(search: str = "") -> QuerySet[Tenant, Any]:
    """Every tenant with its plan and resource counts (operators)."""
    qs = Tenant.objects.select_related("plan", "cluster").annotate(
        topic_count=Count("topics", distinct=True),
        group_count=Count("consumer_groups", distinct=True),
        member_count=Count("memberships", distinct=True),
    )
    if search:
        qs = qs.filter(Q(namespace__icontains=search) | Q(name__icontains=search))
    return qs.order_by("namespace")


def plans() -> QuerySet[Plan, Any]:
    return Plan.objects.annotate(tenant_count=Count("tenants")).order_by("name")


def broker_clusters() -> QuerySet[BrokerCluster, Any]:
    return BrokerCluster.objects.annotate(
        group_count=Count("groups", distinct=True), tenant_count=Count("tenants", distinct=True)
    ).order_by("name")


def broker_groups() -> QuerySet[BrokerGroup, Any]:
    return (
        BrokerGroup.objects.select_related("cluster")
        .annotate(
            node_count=Count("nodes", distinct=True), placement_count=Count("placements", distinct=True)
        )
        .order_by("cluster__name", "name")
    )


def broker_nodes() -> QuerySet[BrokerNode, Any]:
    return BrokerNode.objects.select_related("group__cluster").order_by(
        "group__cluster__name", "group__name", "broker_id"
    )


def fresh_tenant(pk: int) -> Tenant:
    """A new instance of the tenant row (a form may write into it without touching the caller's)."""
    return Tenant.objects.get(pk=pk)


def platform_counts() -> dict[str, int]:
    """Head counts for the operator overview."""
    return {
        "tenants": Tenant.objects.count(),
        "plans": Plan.objects.count(),
        "clusters": BrokerCluster.objects.count(),
        "nodes": BrokerNode.objects.count(),
        "healthy_nodes": BrokerNode.objects.filter(health=BrokerHealth.HEALTHY).count(),
        "topics": Topic.objects.count(),
        "groups": ConsumerGroup.objects.count(),
    }


def usage_days(tenant: Tenant, days: int = 31, today: date | None = None) -> list[UsageDaily]:
    """The tenant's billed usage per day over the last ``days`` days, oldest first."""
    since = (today or date.today()) - timedelta(days=days)
    return list(UsageDaily.objects.filter(tenant=tenant, date__gt=since).order_by("date"))


def lag_days(tenant: Tenant, days: int = 14, today: date | None = None) -> QuerySet[LagDaily, Any]:
    """The nightly lag report's rows of the tenant's groups, newest day first."""
    since = (today or date.today()) - timedelta(days=days)
    return LagDaily.objects.filter(tenant=tenant, date__gt=since).order_by("-date", "group_name")


def invoices(tenant: Tenant) -> QuerySet[Invoice, Any]:
    """The tenant's invoices with their lines, newest first."""
    return Invoice.objects.filter(tenant=tenant).prefetch_related("lines").order_by("-period_start")


def job_runs(job: str = "", status: str = "") -> QuerySet[JobRun, Any]:
    """Analytics job runs, newest first, optionally of one job or status."""
    runs = JobRun.objects.order_by("-started")
    if job:
        runs = runs.filter(job=job)
    if status:
        runs = runs.filter(status=status)
    return runs
