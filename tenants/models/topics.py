"""Topics, their placement over broker groups, and consumer groups."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from tenants.choices import RetryPolicy, TopicMessageType
from tenants.constants import (
    DEFAULT_MAX_DELIVERY_ATTEMPTS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_QUEUE_COUNT,
    DEFAULT_RETENTION_HOURS,
    MAX_QUEUE_COUNT,
    NAMESPACE_SEPARATOR,
    RESOURCE_NAME_PATTERN,
)
from tenants.models.clusters import BrokerCluster, BrokerGroup
from tenants.models.provisioned import ProvisionedModel
from tenants.models.tenants import Tenant

__all__ = ("ConsumerGroup", "Topic", "TopicPlacement")

resource_name_validator = RegexValidator(
    RESOURCE_NAME_PATTERN, "Use 1-100 letters, digits, '-' or '_'.", code="invalid_name"
)


class Topic(ProvisionedModel):
    """A tenant's topic; lives on the brokers as ``{namespace}%{name}``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="topics")
    name = models.CharField(max_length=100, validators=[resource_name_validator])
    description = models.TextField(blank=True)
    message_type = models.CharField(
        max_length=16, choices=TopicMessageType.choices, default=TopicMessageType.NORMAL
    )
    queue_count = models.PositiveIntegerField(
        default=DEFAULT_QUEUE_COUNT, validators=[MinValueValidator(1), MaxValueValidator(MAX_QUEUE_COUNT)]
    )
    retention_hours = models.PositiveIntegerField(
        default=DEFAULT_RETENTION_HOURS, validators=[MinValueValidator(1)], help_text="Hot (local) retention."
    )
    tiered_retention_hours = models.PositiveIntegerField(
        default=0, help_text="Retention in the object store after the hot period; 0 disables tiering."
    )
    max_message_bytes = models.PositiveIntegerField(
        default=DEFAULT_MAX_MESSAGE_BYTES, validators=[MinValueValidator(1)]
    )
    cluster = models.ForeignKey(
        BrokerCluster, on_delete=models.PROTECT, related_name="topics", null=True, blank=True
    )

    class Meta:
        ordering = ("tenant", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("tenant", "name"),
                name="%(app_label)s_%(class)s_unique_tenant_name",
                violation_error_message="A topic with this name exists in the tenant.",
            ),
        )

    def __str__(self) -> str:
        return self.name

    @property
    def qualified_name(self) -> str:
        return f"{self.tenant.namespace}{NAMESPACE_SEPARATOR}{self.name}"


class TopicPlacement(models.Model):
    """How many of a topic's queues live on one broker group."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="placements")
    broker_group = models.ForeignKey(BrokerGroup, on_delete=models.PROTECT, related_name="placements")
    queue_count = models.PositiveIntegerField()

    class Meta:
        ordering = ("topic", "broker_group")
        constraints = (
            models.UniqueConstraint(
                fields=("topic", "broker_group"), name="%(app_label)s_%(class)s_unique_topic_group"
            ),
        )

    def __str__(self) -> str:
        return f"{self.topic_id}@{self.broker_group_id}x{self.queue_count}"


class ConsumerGroup(ProvisionedModel):
    """A tenant's consumer group; lives on every broker group of its cluster as ``{namespace}%{name}``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="consumer_groups")
    name = models.CharField(max_length=100, validators=[resource_name_validator])
    description = models.TextField(blank=True)
    fifo = models.BooleanField(default=False, help_text="Deliver FIFO topics' messages in order.")
    broadcast = models.BooleanField(default=False, help_text="Every consumer gets every message.")
    max_delivery_attempts = models.PositiveIntegerField(
        default=DEFAULT_MAX_DELIVERY_ATTEMPTS, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    retry_policy = models.CharField(
        max_length=16, choices=RetryPolicy.choices, default=RetryPolicy.EXPONENTIAL
    )
    retry_initial_backoff_ms = models.PositiveIntegerField(default=1000)
    retry_max_backoff_ms = models.PositiveIntegerField(default=2 * 60 * 60 * 1000)
    cluster = models.ForeignKey(
        BrokerCluster, on_delete=models.PROTECT, related_name="consumer_groups", null=True, blank=True
    )
    # Lag SLO (the nightly lag report counts the minutes above it); either, both or neither may be set.
    lag_slo_messages = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Lag SLO in messages; minutes above it are reported."
    )
    lag_slo_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Lag SLO in seconds (age of the oldest unconsumed message)."
    )

    class Meta:
        ordering = ("tenant", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("tenant", "name"),
                name="%(app_label)s_%(class)s_unique_tenant_name",
                violation_error_message="A consumer group with this name exists in the tenant.",
            ),
        )

    def __str__(self) -> str:
        return self.name

    @property
    def qualified_name(self) -> str:
        return f"{self.tenant.namespace}{NAMESPACE_SEPARATOR}{self.name}"
