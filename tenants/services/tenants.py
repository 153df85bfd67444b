"""Tenants, memberships and plans."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q

from tenants.choices import MembershipRole
from tenants.errors import AlreadyExists, InvalidState, PermissionDeniedError
from tenants.models import Membership, Plan, Tenant
from tenants.services.audit import Actor, create_audited, delete_audited, update_audited
from tenants.services.limits import default_plan
from tenants.services.provisioning import enqueue_tenant_quotas

__all__ = (
    "add_member",
    "change_member",
    "create_plan",
    "create_tenant",
    "delete_plan",
    "delete_tenant",
    "remove_member",
    "update_plan",
    "update_tenant",
)


@transaction.atomic
def create_tenant(actor: Actor, owner: AbstractBaseUser | None = None, **fields: Any) -> Tenant:
    """Create a tenant on the given plan (or the default plan); ``owner`` becomes its first owner.
    Its plan's limits go to the brokers at once: a namespace without a quota on a broker is not
    limited there, and the next reconcile may be a minute away."""
    tenant = Tenant(**fields)
    if tenant.plan_id is None:
        tenant.plan = default_plan()
    create_audited(actor, tenant)
    if owner is not None:
        membership = Membership(tenant=tenant, user=owner, role=MembershipRole.OWNER)  # type: ignore[misc]
        create_audited(actor, membership)
    enqueue_tenant_quotas([tenant.pk])
    return tenant


@transaction.atomic
def update_tenant(actor: Actor, tenant: Tenant, **changes: Any) -> Tenant:
    """Change a tenant; a new plan, or a new home cluster, re-pushes its quotas to the brokers."""
    plan_changed = "plan" in changes and changes["plan"] != tenant.plan
    moved = "cluster" in changes and changes["cluster"] != tenant.cluster
    update_audited(actor, tenant, changes)
    if plan_changed or moved:
        enqueue_tenant_quotas([tenant.pk])
    return tenant


@transaction.atomic
def delete_tenant(actor: Actor, tenant: Tenant) -> None:
    """Delete an empty tenant; one that still owns topics, groups or keys is refused (409)."""
    delete_audited(actor, tenant)


#
# Memberships
#


def _check_grant(actor_role: str | None, role: str) -> None:
    # None: a platform operator. Admins manage members but only owners make or unmake owners.
    if actor_role is not None and role == MembershipRole.OWNER and actor_role != MembershipRole.OWNER:
        raise PermissionDeniedError("Only an owner can grant or remove the owner role.")


def _check_not_last_owner(membership: Membership) -> None:
    if membership.role != MembershipRole.OWNER:
        return
    owners = Membership.objects.select_for_update().filter(
        tenant_id=membership.tenant_id, role=MembershipRole.OWNER
    )
    if owners.count() <= 1:
        raise InvalidState("A tenant keeps at least one owner; make someone else owner first.")


@transaction.atomic
def add_member(
    actor: Actor, actor_role: str | None, tenant: Tenant, user: AbstractBaseUser, role: str
) -> Membership:
    _check_grant(actor_role, role)
    if Membership.objects.filter(tenant=tenant, user_id=user.pk).exists():
        raise AlreadyExists("The user is already a member of this tenant.", {"user": ["Already a member."]})
    membership = Membership(tenant=tenant, user=user, role=role)  # type: ignore[misc]
    create_audited(actor, membership)
    return membership


@transaction.atomic
def change_member(actor: Actor, actor_role: str | None, membership: Membership, role: str) -> Membership:
    _check_grant(actor_role, membership.role)
    _check_grant(actor_role, role)
    if role != MembershipRole.OWNER:
        _check_not_last_owner(membership)
    update_audited(actor, membership, {"role": role})
    return membership


@transaction.atomic
def remove_member(actor: Actor, actor_role: str | None, membership: Membership) -> None:
    _check_grant(actor_role, membership.role)
    _check_not_last_owner(membership)
    delete_audited(actor, membership)


#
# Plans
#


@transaction.atomic
def create_plan(actor: Actor, **fields: Any) -> Plan:
    plan = Plan(**fields)
    if plan.is_default:
        Plan.objects.filter(is_default=True).update(is_default=False)
    create_audited(actor, plan)
    return plan


@transaction.atomic
def update_plan(actor: Actor, plan: Plan, **changes: Any) -> Plan:
    """Change a plan; every tenant on it gets its quotas re-pushed."""
    if changes.get("is_default"):
        Plan.objects.filter(is_default=True).exclude(pk=plan.pk).update(is_default=False)
    update_audited(actor, plan, changes)
    on_plan = Q(plan=plan) | Q(plan__isnull=True) if plan.is_default else Q(plan=plan)
    enqueue_tenant_quotas(list(Tenant.objects.filter(on_plan).values_list("pk", flat=True)))
    return plan


@transaction.atomic
def delete_plan(actor: Actor, plan: Plan) -> None:
    delete_audited(actor, plan)
