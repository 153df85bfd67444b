"""API views: health, then one viewset per resource (declarations; behaviour is in api/viewsets.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Model
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from tenants import filtersets
from tenants.api import serializers as s
from tenants.api.data_plane import GroupDataPlaneViews, TopicDataPlaneViews
from tenants.api.permissions import BUILDERS, MANAGERS, IsOperator, IsOperatorOrReadOnly, is_operator
from tenants.api.viewsets import ControlPlaneViewSet, ProvisionedViewSet, TenantScopedViewSet
from tenants.models import (
    AccessKey,
    AclPolicy,
    AuditEvent,
    BrokerCluster,
    BrokerGroup,
    BrokerNode,
    ConsumerGroup,
    Membership,
    Plan,
    Quota,
    Tenant,
    Topic,
)
from tenants.services import access_keys, acls, clusters, groups, quotas, topics
from tenants.services import tenants as tenant_services

__all__ = (
    "AccessKeyViewSet",
    "AclPolicyViewSet",
    "AuditEventViewSet",
    "BrokerClusterViewSet",
    "BrokerGroupViewSet",
    "BrokerNodeViewSet",
    "ConsumerGroupViewSet",
    "HealthView",
    "MembershipViewSet",
    "PlanViewSet",
    "QuotaViewSet",
    "TenantViewSet",
    "TopicViewSet",
)


class HealthView(APIView):
    """Liveness and database reachability; open to anonymous probes."""

    permission_classes = (AllowAny,)
    authentication_classes = ()

    @extend_schema(
        responses=inline_serializer(
            "Health", {"status": serializers.CharField(), "database": serializers.CharField()}
        )
    )
    def get(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Response({"status": "ok", "database": connection.vendor})


#
# Tenants, members, plans
#


class TenantViewSet(TenantScopedViewSet):
    """Tenants: operators create and delete; owners/admins rename; plan, cluster, status are operators'."""

    queryset = Tenant.objects.all()
    serializer_class = s.TenantSerializer
    filterset_class = filtersets.TenantFilterSet
    ordering_fields = ("namespace", "name", "created", "status")
    search_fields = ("namespace", "name")
    tenant_path = "pk"
    write_roles = MANAGERS
    operator_fields = frozenset({"plan", "cluster", "status"})

    def tenant_id_of(self, obj: Model) -> int | None:
        return int(obj.pk)

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        if not is_operator(self.request.user):
            raise PermissionDenied("Only platform operators create tenants.")
        serializer.instance = tenant_services.create_tenant(self.actor, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        data = dict(serializer.validated_data)
        data.pop("owner", None)
        if not is_operator(self.request.user) and self.operator_fields & data.keys():
            instance = serializer.instance
            if any(data[k] != getattr(instance, k) for k in self.operator_fields & data.keys()):
                raise PermissionDenied("Only platform operators change a tenant's plan, cluster or status.")
        assert serializer.instance is not None  # an update always has its object
        serializer.instance = tenant_services.update_tenant(self.actor, serializer.instance, **data)

    def perform_destroy(self, instance: Tenant) -> None:
        if not is_operator(self.request.user):
            raise PermissionDenied("Only platform operators delete tenants.")
        tenant_services.delete_tenant(self.actor, instance)


class MembershipViewSet(TenantScopedViewSet):
    """Members of the caller's tenants; owners and admins manage them (only owners grant owner)."""

    queryset = Membership.objects.select_related("user", "tenant")
    serializer_class = s.MembershipSerializer
    filterset_class = filtersets.MembershipFilterSet
    ordering_fields = ("created", "role")
    search_fields = ("user__username",)
    write_roles = MANAGERS

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        self.require_write_role(data["tenant"])
        serializer.instance = tenant_services.add_member(
            self.actor, self.caller_role(data["tenant"]), data["tenant"], data["user"], data["role"]
        )

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        membership = serializer.instance
        assert membership is not None  # an update always has its object
        role = serializer.validated_data.get("role", membership.role)
        serializer.instance = tenant_services.change_member(
            self.actor, self.caller_role(membership.tenant_id), membership, role
        )

    def perform_destroy(self, instance: Membership) -> None:
        tenant_services.remove_member(self.actor, self.caller_role(instance.tenant_id), instance)


class PlanViewSet(ControlPlaneViewSet):
    """Plans are readable by every signed-in user (they are the price list); operators manage them."""

    queryset = Plan.objects.all()
    serializer_class = s.PlanSerializer
    filterset_class = filtersets.PlanFilterSet
    permission_classes = (IsOperatorOrReadOnly,)
    ordering_fields = ("name", "price_monthly", "created")
    search_fields = ("name", "display_name")

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        serializer.instance = tenant_services.create_plan(self.actor, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        assert serializer.instance is not None  # an update always has its object
        serializer.instance = tenant_services.update_plan(
            self.actor, serializer.instance, **serializer.validated_data
        )

    def perform_destroy(self, instance: Plan) -> None:
        tenant_services.delete_plan(self.actor, instance)


#
# Provisioned, tenant-owned resources
#


@extend_schema_view(
    create=extend_schema(responses={201: s.AccessKeyCreatedSerializer}),
    destroy=extend_schema(responses={202: s.AccessKeySerializer}),
)
class AccessKeyViewSet(ProvisionedViewSet):
    """Access keys; the secret is in the create and rotate responses only. Owners/admins manage them."""

    queryset = AccessKey.objects.select_related("tenant")
    serializer_class = s.AccessKeySerializer
    filterset_class = filtersets.AccessKeyFilterSet
    ordering_fields = ("created", "expires_at", "access_key")
    search_fields = ("access_key", "description")
    write_roles = MANAGERS
    update_service = staticmethod(access_keys.update_access_key)
    delete_service = staticmethod(access_keys.delete_access_key)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = serializer.validated_data["tenant"]
        self.require_write_role(tenant)
        key, secret = access_keys.create_access_key(
            self.actor, tenant, serializer.validated_data.get("description", "")
        )
        return self._with_secret(key, secret)

    @extend_schema(request=s.AccessKeyRotateSerializer, responses={201: s.AccessKeyCreatedSerializer})
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str | None = None) -> Response:
        """Issue a successor key; the old one keeps working for ``overlap_seconds``."""
        key = self.get_object()
        params = s.AccessKeyRotateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        overlap = timedelta(seconds=params.validated_data["overlap_seconds"])
        new_key, secret = access_keys.rotate_access_key(self.actor, key, overlap)
        return self._with_secret(new_key, secret)

    @extend_schema(request=None, responses={200: s.AccessKeySerializer})
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Stop the key at once."""
        key = access_keys.revoke_access_key(self.actor, self.get_object())
        return Response(self.get_serializer(key).data)

    def _with_secret(self, key: AccessKey, secret: str) -> Response:
        context = {**self.get_serializer_context(), "secret_key": secret}
        data = s.AccessKeyCreatedSerializer(key, context=context).data
        return Response(data, status=status.HTTP_201_CREATED)


@extend_schema_view(destroy=extend_schema(responses={202: s.TopicSerializer}))
class TopicViewSet(TopicDataPlaneViews, ProvisionedViewSet):
    """Topics; developers and up manage them. Creation is refused past the plan's topic limit."""

    queryset = Topic.objects.select_related("tenant").prefetch_related("placements__broker_group")
    serializer_class = s.TopicSerializer
    filterset_class = filtersets.TopicFilterSet
    ordering_fields = ("name", "created", "queue_count", "message_type", "status")
    search_fields = ("name", "description")
    write_roles = BUILDERS
    create_service = staticmethod(topics.create_topic)
    update_service = staticmethod(topics.update_topic)
    delete_service = staticmethod(topics.delete_topic)


@extend_schema_view(destroy=extend_schema(responses={202: s.ConsumerGroupSerializer}))
class ConsumerGroupViewSet(GroupDataPlaneViews, ProvisionedViewSet):
    """Consumer groups; developers and up manage them."""

    queryset = ConsumerGroup.objects.select_related("tenant")
    serializer_class = s.ConsumerGroupSerializer
    filterset_class = filtersets.ConsumerGroupFilterSet
    ordering_fields = ("name", "created", "status")
    search_fields = ("name", "description")
    write_roles = BUILDERS
    create_service = staticmethod(groups.create_group)
    update_service = staticmethod(groups.update_group)
    delete_service = staticmethod(groups.delete_group)


@extend_schema_view(destroy=extend_schema(responses={202: s.AclPolicySerializer}))
class AclPolicyViewSet(ProvisionedViewSet):
    """ACL 2.0 policies; owners and admins manage them."""

    queryset = AclPolicy.objects.select_related("tenant")
    serializer_class = s.AclPolicySerializer
    filterset_class = filtersets.AclPolicyFilterSet
    ordering_fields = ("principal", "resource_name", "created")
    search_fields = ("principal", "resource_name", "description")
    write_roles = MANAGERS
    create_service = staticmethod(acls.create_acl)
    update_service = staticmethod(acls.update_acl)
    delete_service = staticmethod(acls.delete_acl)


@extend_schema_view(destroy=extend_schema(responses={202: s.QuotaSerializer}))
class QuotaViewSet(ProvisionedViewSet):
    """Quota overrides; members read them, operators set them (they are commercial terms)."""

    queryset = Quota.objects.select_related("tenant")
    serializer_class = s.QuotaSerializer
    filterset_class = filtersets.QuotaFilterSet
    ordering_fields = ("created",)
    write_roles = frozenset()
    create_service = staticmethod(quotas.create_quota)
    update_service = staticmethod(quotas.update_quota)
    delete_service = staticmethod(quotas.delete_quota)


#
# Broker registry (operators only) and the audit trail
#


class _RegistryViewSet(ControlPlaneViewSet):
    permission_classes = (IsOperator,)

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        model = serializer.Meta.model  # type: ignore[attr-defined]
        serializer.instance = clusters.create_registry_object(self.actor, model(**serializer.validated_data))

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        assert serializer.instance is not None  # an update always has its object
        serializer.instance = clusters.update_registry_object(
            self.actor, serializer.instance, dict(serializer.validated_data)
        )

    def perform_destroy(self, instance: Any) -> None:
        clusters.delete_registry_object(self.actor, instance)


class BrokerClusterViewSet(_RegistryViewSet):
    """Broker clusters (operators only)."""

    queryset = BrokerCluster.objects.all()
    serializer_class = s.BrokerClusterSerializer
    filterset_class = filtersets.BrokerClusterFilterSet
    ordering_fields = ("name", "created")
    search_fields = ("name", "description")


class BrokerGroupViewSet(_RegistryViewSet):
    """Broker groups (operators only)."""

    queryset = BrokerGroup.objects.all()
    serializer_class = s.BrokerGroupSerializer
    filterset_class = filtersets.BrokerGroupFilterSet
    ordering_fields = ("name", "created")
    search_fields = ("name",)


class BrokerNodeViewSet(_RegistryViewSet):
    """Broker nodes (operators only); registering one reconciles it at once."""

    queryset = BrokerNode.objects.all()
    serializer_class = s.BrokerNodeSerializer
    filterset_class = filtersets.BrokerNodeFilterSet
    ordering_fields = ("name", "broker_id", "health", "last_seen", "created")
    search_fields = ("name", "endpoint")


class AuditEventViewSet(TenantScopedViewSet, viewsets.ReadOnlyModelViewSet):  # type: ignore[misc,type-arg]
    """The audit trail: operators see everything, members their tenants' events."""

    queryset = AuditEvent.objects.all()
    serializer_class = s.AuditEventSerializer
    filterset_class = filtersets.AuditEventFilterSet
    ordering_fields = ("created",)
    search_fields = ("object_repr", "actor_name")
    http_method_names = ("get", "head", "options")
