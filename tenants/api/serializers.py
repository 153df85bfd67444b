"""API serializers: declare fields and validate input; the services do the work."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tenants.api.permissions import is_operator
from tenants.choices import AclAction
from tenants.constants import ACCESS_KEY_ROTATION_OVERLAP, QUOTA_LIMIT_FIELDS
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
    TopicPlacement,
)

__all__ = (
    "AccessKeyCreatedSerializer",
    "AccessKeyRotateSerializer",
    "AccessKeySerializer",
    "AclPolicySerializer",
    "AuditEventSerializer",
    "BrokerClusterSerializer",
    "BrokerGroupSerializer",
    "BrokerNodeSerializer",
    "ConsumerGroupSerializer",
    "MembershipSerializer",
    "PlanSerializer",
    "QuotaSerializer",
    "TenantSerializer",
    "TopicSerializer",
)

PROVISIONING_FIELDS = ("status", "status_message", "generation", "applied_generation", "created", "updated")


class TenantField(serializers.PrimaryKeyRelatedField):  # type: ignore[type-arg]
    """A tenant id among the caller's tenants; any other id reads as "does not exist"."""

    def get_queryset(self) -> QuerySet[Tenant]:
        request = self.context.get("request")
        qs = Tenant.objects.all()
        if request is None or is_operator(request.user):
            return qs
        return qs.filter(memberships__user_id=request.user.pk)


class ImmutableFieldsMixin:
    """Fields listed in ``Meta.immutable_fields`` may be given on create only."""

    instance: Any

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is not None:
            errors = {
                name: ["This field cannot be changed."]
                for name in getattr(self.Meta, "immutable_fields", ())  # type: ignore[attr-defined]
                if name in attrs and attrs[name] != getattr(self.instance, name)
            }
            if errors:
                raise serializers.ValidationError(errors)
        return attrs


class TenantOwnedSerializer(ImmutableFieldsMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    tenant = TenantField()
    namespace = serializers.CharField(source="tenant.namespace", read_only=True)


#
# Tenants, members, plans
#


class PlanSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Plan
        fields = "__all__"
        read_only_fields = ("created", "updated")


class TenantSerializer(ImmutableFieldsMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    owner = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.all(),
        write_only=True,
        required=False,
        help_text="On create: the user who becomes the tenant's first owner.",
    )

    class Meta:
        model = Tenant
        fields = ("id", "name", "namespace", "plan", "cluster", "status", "owner", "created", "updated")
        read_only_fields = ("created", "updated")
        immutable_fields = ("namespace",)


class MembershipSerializer(ImmutableFieldsMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    tenant = TenantField()
    user = serializers.SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all())

    class Meta:
        model = Membership
        fields = ("id", "tenant", "user", "role", "created", "updated")
        read_only_fields = ("created", "updated")
        immutable_fields = ("tenant", "user")
        validators: list[Any] = []  # uniqueness is the service's 409, not a 400


#
# Access keys
#


class AccessKeySerializer(TenantOwnedSerializer):
    class Meta:
        model = AccessKey
        fields: tuple[str, ...] = (
            "id",
            "tenant",
            "namespace",
            "access_key",
            "description",
            "key_status",
            "expires_at",
            "rotated_from",
            "revoked_at",
            *PROVISIONING_FIELDS,
        )
        read_only_fields = (
            "access_key",
            "key_status",
            "expires_at",
            "rotated_from",
            "revoked_at",
            *PROVISIONING_FIELDS,
        )
        immutable_fields = ("tenant",)


class AccessKeyCreatedSerializer(AccessKeySerializer):
    """The create/rotate response: the only time ``secret_key`` is ever returned."""

    secret_key = serializers.SerializerMethodField()

    class Meta(AccessKeySerializer.Meta):
        fields = (*AccessKeySerializer.Meta.fields, "secret_key")

    @extend_schema_field(serializers.CharField())
    def get_secret_key(self, obj: AccessKey) -> str:
        return str(self.context.get("secret_key", ""))


class AccessKeyRotateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    overlap_seconds = serializers.IntegerField(
        min_value=0,
        max_value=30 * 24 * 3600,
        default=int(ACCESS_KEY_ROTATION_OVERLAP.total_seconds()),
        help_text="How long the old key keeps working.",
    )


#
# Topics and groups
#


class TopicPlacementSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    broker_group_name = serializers.CharField(source="broker_group.name", read_only=True)

    class Meta:
        model = TopicPlacement
        fields = ("broker_group", "broker_group_name", "queue_count")


class TopicSerializer(TenantOwnedSerializer):
    qualified_name = serializers.CharField(read_only=True)
    placements = TopicPlacementSerializer(many=True, read_only=True)

    class Meta:
        model = Topic
        fields = (
            "id",
            "tenant",
            "namespace",
            "name",
            "qualified_name",
            "description",
            "message_type",
            "queue_count",
            "retention_hours",
            "tiered_retention_hours",
            "max_message_bytes",
            "cluster",
            "placements",
            *PROVISIONING_FIELDS,
        )
        read_only_fields = ("cluster", *PROVISIONING_FIELDS)
        immutable_fields = ("tenant", "name")
        validators: list[Any] = []


class ConsumerGroupSerializer(TenantOwnedSerializer):
    qualified_name = serializers.CharField(read_only=True)

    class Meta:
        model = ConsumerGroup
        fields = (
            "id",
            "tenant",
            "namespace",
            "name",
            "qualified_name",
            "description",
            "fifo",
            "broadcast",
            "max_delivery_attempts",
            "retry_policy",
            "retry_initial_backoff_ms",
            "retry_max_backoff_ms",
            "lag_slo_messages",
            "lag_slo_seconds",
            "cluster",
            *PROVISIONING_FIELDS,
        )
        read_only_fields = ("cluster", *PROVISIONING_FIELDS)
        immutable_fields = ("tenant", "name")
        validators: list[Any] = []

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        initial = attrs.get(
            "retry_initial_backoff_ms", getattr(self.instance, "retry_initial_backoff_ms", 1000)
        )
        most = attrs.get("retry_max_backoff_ms", getattr(self.instance, "retry_max_backoff_ms", initial))
        if most < initial:
            raise serializers.ValidationError(
                {"retry_max_backoff_ms": ["Must be at least the initial backoff."]}
            )
        return attrs


#
# ACLs and quotas
#


class AclPolicySerializer(TenantOwnedSerializer):
    actions = serializers.ListField(
        child=serializers.ChoiceField(choices=AclAction.choices), allow_empty=False
    )
    source_cidrs = serializers.ListField(child=serializers.CharField(max_length=64), required=False)

    class Meta:
        model = AclPolicy
        fields = (
            "id",
            "tenant",
            "namespace",
            "principal",
            "resource_type",
            "resource_pattern",
            "resource_name",
            "actions",
            "source_cidrs",
            "decision",
            "description",
            *PROVISIONING_FIELDS,
        )
        read_only_fields = PROVISIONING_FIELDS
        immutable_fields = ("tenant",)


class QuotaSerializer(TenantOwnedSerializer):
    scope = serializers.CharField(read_only=True)

    class Meta:
        model = Quota
        fields = (
            "id",
            "tenant",
            "namespace",
            "scope",
            "topic",
            "group",
            *QUOTA_LIMIT_FIELDS,
            *PROVISIONING_FIELDS,
        )
        read_only_fields = PROVISIONING_FIELDS
        immutable_fields = ("tenant", "topic", "group")
        validators: list[Any] = []


#
# Broker registry
#


class BrokerClusterSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = BrokerCluster
        fields = "__all__"
        read_only_fields = ("created", "updated")


class BrokerGroupSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = BrokerGroup
        fields = "__all__"
        read_only_fields = ("created", "updated")


class BrokerNodeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = BrokerNode
        fields = "__all__"
        read_only_fields = ("health", "health_message", "last_seen", "last_reconciled", "created", "updated")


#
# Audit
#


class AuditEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = AuditEvent
        fields = "__all__"
        read_only_fields = tuple(f.name for f in AuditEvent._meta.fields)
