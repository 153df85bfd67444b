"""Who may change what: the role rules every presentation layer (API, console) applies.

Operators (``is_staff``) act above roles in every tenant. A tenant member's role decides which kinds
of objects it may change; a user who is not a member sees nothing of the tenant.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tenants.choices import MembershipRole
from tenants.models import Membership, Tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.db.models import QuerySet

__all__ = (
    "BUILDERS",
    "MANAGERS",
    "WRITE_ROLES",
    "Change",
    "is_operator",
    "may_change",
    "role_of",
    "visible_tenant",
    "visible_tenants",
)

MANAGERS = frozenset({MembershipRole.OWNER, MembershipRole.ADMIN})
BUILDERS = MANAGERS | {MembershipRole.DEVELOPER}


class Change(StrEnum):
    """The kinds of change a member may be allowed to make in a tenant."""

    TOPIC = "topic"
    CONSUMER_GROUP = "consumer_group"
    ACCESS_KEY = "access_key"
    ACL_POLICY = "acl_policy"
    MEMBERSHIP = "membership"
    TENANT = "tenant"  # rename only; plan, cluster and status are operators'
    QUOTA = "quota"  # commercial terms: operators only
    MESSAGES = "messages"  # send test messages, reset offsets, re-drive dead letters
    ALERT_RULE = "alert_rule"


# The same matrix as the REST API (docs/control-plane.md, "Roles and permissions").
WRITE_ROLES: dict[Change, frozenset[str]] = {
    Change.TOPIC: BUILDERS,
    Change.CONSUMER_GROUP: BUILDERS,
    Change.MESSAGES: BUILDERS,
    Change.ALERT_RULE: BUILDERS,
    Change.ACCESS_KEY: MANAGERS,
    Change.ACL_POLICY: MANAGERS,
    Change.MEMBERSHIP: MANAGERS,
    Change.TENANT: MANAGERS,
    Change.QUOTA: frozenset(),
}


def is_operator(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """A platform operator: signed in and ``is_staff``."""
    return bool(user is not None and user.is_authenticated and getattr(user, "is_staff", False))


def visible_tenants(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Tenant, Any]:
    """The tenants a user may see: all for operators, else those it is a member of."""
    if is_operator(user):
        return Tenant.objects.select_related("plan").all()
    if not user.is_authenticated:
        return Tenant.objects.none()
    return Tenant.objects.select_related("plan").filter(memberships__user_id=user.pk)


def visible_tenant(user: AbstractBaseUser | AnonymousUser, namespace: str) -> Tenant | None:
    """The tenant with this namespace if the user may see it; None reads as "does not exist"."""
    return visible_tenants(user).filter(namespace=namespace).first()


def role_of(user: AbstractBaseUser | AnonymousUser, tenant: Tenant) -> str | None:
    """The user's membership role in the tenant, None when not a member."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user_id=user.pk, tenant=tenant).values_list("role", flat=True).first()


def may_change(user: AbstractBaseUser | AnonymousUser, role: str | None, change: Change) -> bool:
    """Whether a user holding ``role`` in a tenant may make this kind of change there."""
    if is_operator(user):
        return True
    return role is not None and role in WRITE_ROLES[change]
