"""Quota overrides: per tenant, per topic and per consumer group."""

from __future__ import annotations

from django.db import models

from tenants.models.provisioned import ProvisionedModel
from tenants.models.tenants import Tenant
from tenants.models.topics import ConsumerGroup, Topic

__all__ = ("Quota",)


class Quota(ProvisionedModel):
    """Overrides of the plan's default limits; an empty field inherits.

    With neither ``topic`` nor ``group`` set it applies to the whole tenant (one per tenant);
    otherwise it narrows the rate limits of one topic or group (one per topic or group).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="quotas", null=True, blank=True)
    group = models.ForeignKey(
        ConsumerGroup, on_delete=models.CASCADE, related_name="quotas", null=True, blank=True
    )
    produce_messages_per_s = models.PositiveBigIntegerField(null=True, blank=True)
    produce_bytes_per_s = models.PositiveBigIntegerField(null=True, blank=True)
    consume_messages_per_s = models.PositiveBigIntegerField(null=True, blank=True)
    consume_bytes_per_s = models.PositiveBigIntegerField(null=True, blank=True)
    storage_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    max_topics = models.PositiveIntegerField(null=True, blank=True)
    max_groups = models.PositiveIntegerField(null=True, blank=True)
    max_message_bytes = models.PositiveIntegerField(null=True, blank=True)
    max_connections = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ("tenant", "id")
        constraints = (
            models.CheckConstraint(
                condition=models.Q(topic__isnull=True) | models.Q(group__isnull=True),
                name="%(app_label)s_%(class)s_topic_or_group",
                violation_error_message="A quota overrides a topic or a group, not both.",
            ),
            models.UniqueConstraint(
                fields=("tenant",),
                condition=models.Q(topic__isnull=True, group__isnull=True),
                name="%(app_label)s_%(class)s_one_per_tenant",
                violation_error_message="The tenant already has a tenant-wide quota.",
            ),
            models.UniqueConstraint(
                fields=("topic",),
                name="%(app_label)s_%(class)s_one_per_topic",
                violation_error_message="The topic already has a quota.",
            ),
            models.UniqueConstraint(
                fields=("group",),
                name="%(app_label)s_%(class)s_one_per_group",
                violation_error_message="The group already has a quota.",
            ),
        )

    def __str__(self) -> str:
        return f"quota {self.scope}"

    @property
    def scope(self) -> str:
        if self.topic_id:
            return "topic"
        if self.group_id:
            return "group"
        return "tenant"
