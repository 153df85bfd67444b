"""Plans, tenants and their members: who owns what, and on which terms."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from tenants.choices import MembershipRole, TenantStatus

__all__ = ("Membership", "Plan", "Tenant")


class Plan(models.Model):
    """A commercial plan: the default quota of its tenants and the prices they pay."""

    name = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=100, blank=True)
    description = models.TextField(blank=True)
    is_default = models.BooleanField(default=False, help_text="Given to tenants created without a plan.")
    # default quotas (same names as Quota; 0 means "none allowed")
    produce_messages_per_s = models.PositiveBigIntegerField(default=1000)
    produce_bytes_per_s = models.PositiveBigIntegerField(default=4 * 1024 * 1024)
    consume_messages_per_s = models.PositiveBigIntegerField(default=2000)
    consume_bytes_per_s = models.PositiveBigIntegerField(default=8 * 1024 * 1024)
    storage_bytes = models.PositiveBigIntegerField(default=10 * 1024**3)
    max_topics = models.PositiveIntegerField(default=100)
    max_groups = models.PositiveIntegerField(default=100)
    max_message_bytes = models.PositiveIntegerField(default=4 * 1024 * 1024)
    max_connections = models.PositiveIntegerField(default=1000)
    # prices (exported nightly to the billing job: docs/analytics.md)
    currency = models.CharField(max_length=3, default="USD")
    price_monthly = models.DecimalField(max_digits=12, decimal_places=2, default=Decimal("0"))
    price_per_million_requests = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        default=Decimal("0"),
        help_text="Per million requests in 4 KiB units, in and out (a message up to 4 KiB is one).",
    )
    price_per_gb_in = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal("0"))
    price_per_gb_out = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal("0"))
    price_per_gb_month = models.DecimalField(
        max_digits=12, decimal_places=4, default=Decimal("0"), help_text="Storage; billed per GB-hour / 730."
    )
    price_per_topic_day = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal("0"))
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        constraints = (
            models.UniqueConstraint(
                fields=("is_default",),
                condition=models.Q(is_default=True),
                name="%(app_label)s_%(class)s_one_default",
                violation_error_message="Only one plan can be the default.",
            ),
        )

    def __str__(self) -> str:
        return self.name


class Tenant(models.Model):
    """A customer of the platform; its namespace qualifies every resource name on the brokers."""

    name = models.CharField(max_length=100)
    namespace = models.SlugField(max_length=64, unique=True, help_text="Unique platform-wide.")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="tenants", null=True, blank=True)
    cluster = models.ForeignKey(
        "tenants.BrokerCluster",
        on_delete=models.PROTECT,
        related_name="tenants",
        null=True,
        blank=True,
        help_text="Where new topics and groups are placed; the default cluster when empty.",
    )
    status = models.CharField(max_length=16, choices=TenantStatus.choices, default=TenantStatus.ACTIVE)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("namespace",)

    def __str__(self) -> str:
        return self.namespace


class Membership(models.Model):
    """A user's role in one tenant; a user may belong to several tenants."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=MembershipRole.choices, default=MembershipRole.VIEWER)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("tenant", "user")
        constraints = (
            models.UniqueConstraint(
                fields=("user", "tenant"),
                name="%(app_label)s_%(class)s_unique_user_tenant",
                violation_error_message="The user is already a member of this tenant.",
            ),
        )

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant_id}:{self.role}"
