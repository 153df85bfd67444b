"""Django admin registrations (operators' escape hatch; the API and console are the main paths)."""

from django.contrib import admin

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


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("namespace", "name", "plan", "status", "created")
    search_fields = ("namespace", "name")
    list_filter = ("status", "plan")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "display_name", "is_default", "max_topics", "price_monthly")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "user", "role")
    list_filter = ("role",)
    raw_id_fields = ("user", "tenant")


@admin.register(AccessKey)
class AccessKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("access_key", "tenant", "key_status", "expires_at", "status")
    list_filter = ("key_status", "status")
    search_fields = ("access_key", "description")
    exclude = ("secret_encrypted",)
    readonly_fields = ("access_key",)


class TopicPlacementInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TopicPlacement
    extra = 0


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "tenant", "message_type", "queue_count", "status")
    list_filter = ("message_type", "status")
    search_fields = ("name",)
    inlines = (TopicPlacementInline,)


@admin.register(ConsumerGroup)
class ConsumerGroupAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "tenant", "fifo", "broadcast", "status")
    list_filter = ("status", "fifo", "broadcast")
    search_fields = ("name",)


@admin.register(AclPolicy)
class AclPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "principal", "resource_type", "resource_name", "decision", "status")
    list_filter = ("resource_type", "decision", "status")


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "topic", "group", "max_topics", "status")


@admin.register(BrokerCluster)
class BrokerClusterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "is_default", "created")


@admin.register(BrokerGroup)
class BrokerGroupAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "cluster", "created")


@admin.register(BrokerNode)
class BrokerNodeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "group", "broker_id", "endpoint", "enabled", "health", "last_seen")
    list_filter = ("health", "enabled")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("created", "actor_name", "tenant_namespace", "action", "object_type", "object_repr")
    list_filter = ("action", "object_type")
    search_fields = ("object_repr", "actor_name", "tenant_namespace")

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False  # the trail is append-only
