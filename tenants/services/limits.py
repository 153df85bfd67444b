"""Effective limits: the plan's defaults overlaid by the tenant's quota, then by a topic/group's."""

from __future__ import annotations

from tenants.choices import ProvisioningStatus
from tenants.constants import QUOTA_LIMIT_FIELDS
from tenants.models import Plan, Quota, Tenant

__all__ = ("default_plan", "effective_limits", "overlay")


def default_plan() -> Plan | None:
    return Plan.objects.filter(is_default=True).first()


def overlay(base: dict[str, int], quota: Quota | None) -> dict[str, int]:
    """``base`` with every limit the quota sets replaced."""
    if quota is None:
        return dict(base)
    result = dict(base)
    for name in QUOTA_LIMIT_FIELDS:
        value = getattr(quota, name)
        if value is not None:
            result[name] = int(value)
    return result


def effective_limits(tenant: Tenant) -> dict[str, int]:
    """The tenant-wide limits in force: plan (or the default plan, or Plan's field defaults) + quota."""
    plan = tenant.plan if tenant.plan_id is not None else default_plan()
    if plan is None:
        plan = Plan()  # field defaults: a tenant never runs without limits
    base = {name: int(getattr(plan, name)) for name in QUOTA_LIMIT_FIELDS}
    # a tenant quota being deleted no longer counts: brokers get the plan's limits back
    quota = (
        Quota.objects.filter(tenant=tenant, topic__isnull=True, group__isnull=True)
        .exclude(status=ProvisioningStatus.DELETING)
        .first()
    )
    return overlay(base, quota)
