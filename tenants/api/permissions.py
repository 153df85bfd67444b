"""Who may do what: platform operators (``is_staff``) everything; tenant members by role.

Tenant-scoped querysets only ever contain the caller's tenants, so another tenant's objects are
404, never 403; a member whose role is too weak for a write gets 403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from rest_framework.permissions import SAFE_METHODS, BasePermission

from tenants.choices import MembershipRole
from tenants.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from rest_framework.request import Request
    from rest_framework.views import APIView

__all__ = (
    "ALL_ROLES",
    "BUILDERS",
    "MANAGERS",
    "IsOperator",
    "IsOperatorOrReadOnly",
    "TenantRolePermission",
    "is_operator",
    "member_tenant_ids",
    "role_in",
)

ALL_ROLES = frozenset(MembershipRole.values)
MANAGERS = frozenset({MembershipRole.OWNER, MembershipRole.ADMIN})
BUILDERS = MANAGERS | {MembershipRole.DEVELOPER}
NOBODY: frozenset[str] = frozenset()


def is_operator(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and getattr(user, "is_staff", False))


def member_tenant_ids(user: Any) -> QuerySet[Membership, Any]:
    """A subquery of the tenants the user belongs to (any role)."""
    return Membership.objects.filter(user_id=user.pk).values("tenant_id")


def role_in(request: Request, tenant_id: int | None) -> str | None:
    """The caller's role in a tenant (one query per request, cached on it); None when not a member."""
    roles: dict[int, str] | None = getattr(request, "_mq_roles", None)
    if roles is None:
        roles = dict(Membership.objects.filter(user_id=request.user.pk or 0).values_list("tenant_id", "role"))
        request._mq_roles = roles  # type: ignore[attr-defined]
    return roles.get(tenant_id) if tenant_id is not None else None


class IsOperator(BasePermission):
    """Platform operators only (the broker registry)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return is_operator(request.user)


class IsOperatorOrReadOnly(BasePermission):
    """Everyone signed in reads; operators write (plans)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return is_operator(request.user)


class TenantRolePermission(BasePermission):
    """Object writes need a role in ``view.write_roles`` for the object's tenant."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        if is_operator(request.user) or request.method in SAFE_METHODS:
            return True
        roles: frozenset[str] = getattr(view, "write_roles", NOBODY)
        role = role_in(request, view.tenant_id_of(obj))  # type: ignore[attr-defined]
        return role is not None and role in roles
