"""API of alert rules (``alert-rules``: developers and up manage them, viewers read) and of the
alerts they fired (``alert-events``, read-only). Members see their tenants' rows, operators all."""

from __future__ import annotations

from typing import Any

import django_filters as filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from tenants.api.permissions import BUILDERS, is_operator
from tenants.api.serializers import TenantOwnedSerializer
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import AlertEvent, AlertRule, ConsumerGroup
from tenants.services import alerts

__all__ = (
    "AlertEventFilterSet",
    "AlertEventSerializer",
    "AlertEventViewSet",
    "AlertRuleFilterSet",
    "AlertRuleSerializer",
    "AlertRuleViewSet",
)


class GroupField(serializers.PrimaryKeyRelatedField):  # type: ignore[type-arg]
    """A consumer group id among the caller's tenants' groups; any other id reads as "does not exist"."""

    def get_queryset(self) -> QuerySet[ConsumerGroup]:
        request = self.context.get("request")
        qs = ConsumerGroup.objects.select_related("tenant")
        if request is None or is_operator(request.user):
            return qs
        return qs.filter(tenant__memberships__user_id=request.user.pk)


class AlertRuleSerializer(TenantOwnedSerializer):
    group = GroupField()
    group_name = serializers.CharField(source="group.name", read_only=True)

    class Meta:
        model = AlertRule
        fields = (
            "id",
            "tenant",
            "namespace",
            "name",
            "group",
            "group_name",
            "lag_threshold",
            "dlq_threshold",
            "channel",
            "email",
            "webhook_url",
            "enabled",
            "firing",
            "last_evaluated",
            "last_notified",
            "created",
            "updated",
        )
        read_only_fields = ("firing", "last_evaluated", "last_notified", "created", "updated")
        immutable_fields = ("tenant",)
        validators: list[Any] = []  # name uniqueness and the threshold rule are the service's


class AlertEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    namespace = serializers.CharField(source="tenant.namespace", read_only=True)
    summary = serializers.CharField(read_only=True)

    class Meta:
        model = AlertEvent
        fields = (
            "id",
            "created",
            "tenant",
            "namespace",
            "rule",
            "rule_name",
            "group_name",
            "metric",
            "value",
            "threshold",
            "summary",
            "channel",
            "target",
            "delivered",
            "delivery_error",
        )


class AlertRuleFilterSet(filters.FilterSet):
    tenant_id = filters.NumberFilter(field_name="tenant_id")
    tenant = filters.CharFilter(field_name="tenant__namespace")
    name = filters.CharFilter(field_name="name")
    group_id = filters.NumberFilter(field_name="group_id")
    group = filters.CharFilter(field_name="group__name")

    class Meta:
        model = AlertRule
        fields = ("channel", "enabled", "firing")


class AlertEventFilterSet(filters.FilterSet):
    tenant_id = filters.NumberFilter(field_name="tenant_id")
    tenant = filters.CharFilter(field_name="tenant__namespace")
    rule_id = filters.NumberFilter(field_name="rule_id")
    since = filters.IsoDateTimeFilter(field_name="created", lookup_expr="gte")

    class Meta:
        model = AlertEvent
        fields = ("metric", "delivered", "group_name")


_SECRET = inline_serializer("AlertRuleSigningSecret", {"signing_secret": serializers.CharField()})


class AlertRuleViewSet(TenantScopedViewSet):
    """Alert rules on consumer groups; developers and up manage them, every member reads them."""

    queryset = AlertRule.objects.select_related("tenant", "group")
    serializer_class = AlertRuleSerializer
    filterset_class = AlertRuleFilterSet
    ordering_fields = ("name", "created")
    search_fields = ("name",)
    write_roles = BUILDERS

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        data = dict(serializer.validated_data)
        tenant = data.pop("tenant")
        self.require_write_role(tenant)
        serializer.instance = alerts.create_alert_rule(self.actor, tenant, **data)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a rule; the answer also carries its webhook ``signing_secret``."""
        response = super().create(request, *args, **kwargs)
        rule = AlertRule.objects.get(pk=response.data["id"])
        response.data["signing_secret"] = alerts.signing_secret(rule)
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(request=None, responses={200: _SECRET})
    @action(detail=True, methods=["get"], url_path="signing-secret")
    def signing_secret(self, request: Request, pk: str | None = None) -> Response:
        """The rule's webhook signing secret: for those who may change the rule (viewers: 403)."""
        rule = self.get_object()
        self.require_write_role(rule.tenant)
        response = Response({"signing_secret": alerts.signing_secret(rule)})
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(request=None, responses={200: _SECRET})
    @action(detail=True, methods=["post"], url_path="rotate-signing-secret")
    def rotate_signing_secret(self, request: Request, pk: str | None = None) -> Response:
        """A new signing secret (audited); the old one stops signing at once."""
        rule = self.get_object()
        response = Response({"signing_secret": alerts.rotate_signing_secret(self.actor, rule)})
        response["Cache-Control"] = "no-store"
        return response

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        data = dict(serializer.validated_data)
        data.pop("tenant", None)
        assert serializer.instance is not None  # an update always has its object
        serializer.instance = alerts.update_alert_rule(self.actor, serializer.instance, **data)

    def perform_destroy(self, instance: AlertRule) -> None:
        alerts.delete_alert_rule(self.actor, instance)


class AlertEventViewSet(TenantScopedViewSet, viewsets.ReadOnlyModelViewSet):  # type: ignore[misc,type-arg]
    """The alerts that fired, newest first (written by the evaluator, never through the API)."""

    queryset = AlertEvent.objects.select_related("tenant")
    serializer_class = AlertEventSerializer
    filterset_class = AlertEventFilterSet
    ordering_fields = ("created",)
    http_method_names = ("get", "head", "options")
