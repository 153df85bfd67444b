"""Base viewsets: authentication, actor/audit context, tenant scoping and role checks, in one place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from rest_framework import status, viewsets
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from tenants.api.permissions import NOBODY, TenantRolePermission, is_operator, member_tenant_ids, role_in
from tenants.models import Tenant
from tenants.services.audit import Actor

__all__ = ("ControlPlaneViewSet", "ProvisionedViewSet", "TenantScopedViewSet", "actor_of")


def actor_of(request: Request) -> Actor:
    """The acting user and the address the request came from (the proxy's, unless it is trusted)."""
    return Actor(user=request.user, source_ip=request.META.get("REMOTE_ADDR") or None)


class ControlPlaneViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    # Token first: an anonymous caller gets 401 with "WWW-Authenticate: Token", not a bare 403.
    authentication_classes = (TokenAuthentication, SessionAuthentication)
    http_method_names: tuple[str, ...] = ("get", "post", "put", "patch", "delete", "head", "options")

    @property
    def actor(self) -> Actor:
        return actor_of(self.request)


class TenantScopedViewSet(ControlPlaneViewSet):
    """Lists only the caller's tenants' objects (operators: all); writes need ``write_roles``."""

    permission_classes = (TenantRolePermission,)
    tenant_path: ClassVar[str] = "tenant"
    write_roles: ClassVar[frozenset[str]] = NOBODY

    def get_queryset(self) -> QuerySet[Any]:
        qs = super().get_queryset()
        if is_operator(self.request.user):
            return qs
        return qs.filter(**{f"{self.tenant_path}__in": member_tenant_ids(self.request.user)})

    def tenant_id_of(self, obj: Model) -> int | None:
        return getattr(obj, "tenant_id", None)

    def caller_role(self, tenant: Tenant | int | None) -> str | None:
        """None for operators (who act above roles), else the caller's role in the tenant."""
        if is_operator(self.request.user):
            return None
        tenant_id = tenant.pk if isinstance(tenant, Tenant) else tenant
        return role_in(self.request, tenant_id)

    def require_write_role(self, tenant: Tenant) -> None:
        if is_operator(self.request.user):
            return
        if role_in(self.request, tenant.pk) not in self.write_roles:
            raise PermissionDenied("Your role in this tenant does not allow this change.")


class ProvisionedViewSet(TenantScopedViewSet):
    """Create/change/delete through the resource's services; DELETE answers 202 (``deleting``)."""

    create_service: ClassVar[Callable[..., Any]]
    update_service: ClassVar[Callable[..., Any]]
    delete_service: ClassVar[Callable[..., Any]]

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        data = dict(serializer.validated_data)
        tenant = data.pop("tenant")
        self.require_write_role(tenant)
        serializer.instance = type(self).create_service(self.actor, tenant, **data)

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        data = dict(serializer.validated_data)
        data.pop("tenant", None)
        serializer.instance = type(self).update_service(self.actor, serializer.instance, **data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        obj = type(self).delete_service(self.actor, obj)
        return Response(self.get_serializer(obj).data, status=status.HTTP_202_ACCEPTED)
