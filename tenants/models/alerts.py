"""Alert rules on consumer groups (lag or dead-letter thresholds) and the alerts they fired."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models

from tenants.choices import AlertChannel, AlertMetric
from tenants.constants import ALERT_DLQ_COUNT_CAP
from tenants.models.tenants import Tenant
from tenants.models.topics import ConsumerGroup

__all__ = ("AlertEvent", "AlertRule")


class AlertRule(models.Model):
    """Notify someone when a consumer group's lag or dead-letter count reaches a threshold.

    Either threshold, or both, may be set; the rule fires when any set one is reached. While it
    stays firing it notifies again only after ``ALERT_RENOTIFY_AFTER`` (no flood every minute).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="alert_rules")
    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=100)
    lag_threshold = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Fire when the group is this many messages (or more) behind, over all its queues.",
    )
    dlq_threshold = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(ALERT_DLQ_COUNT_CAP)],
        help_text=f"Fire when this many dead letters (up to {ALERT_DLQ_COUNT_CAP}) wait for a re-drive.",
    )
    channel = models.CharField(max_length=16, choices=AlertChannel.choices, default=AlertChannel.EMAIL)
    email = models.EmailField(blank=True, help_text="Where e-mail alerts go.")
    webhook_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="An http(s) URL that receives a JSON POST per alert.",
    )
    # Fernet-encrypted (tenants.crypto): the evaluator needs the plain secret to sign each webhook.
    signing_secret_encrypted = models.BinaryField(editable=False, default=bytes)
    enabled = models.BooleanField(default=True)
    firing = models.BooleanField(default=False, help_text="Whether the last evaluation found it reached.")
    last_evaluated = models.DateTimeField(null=True, blank=True)
    last_notified = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("tenant", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("tenant", "name"),
                name="%(app_label)s_%(class)s_unique_tenant_name",
                violation_error_message="An alert rule with this name exists in the tenant.",
            ),
            models.CheckConstraint(
                condition=models.Q(lag_threshold__isnull=False) | models.Q(dlq_threshold__isnull=False),
                name="%(app_label)s_%(class)s_has_threshold",
                violation_error_message="Set a lag threshold, a dead-letter threshold, or both.",
            ),
        )

    def __str__(self) -> str:
        return self.name

    @property
    def target(self) -> str:
        """Where notifications go: the address or URL of the rule's channel."""
        return self.email if self.channel == AlertChannel.EMAIL else self.webhook_url

    def clean(self) -> None:
        """A threshold is set and the channel has its destination (the form shows these per field)."""
        errors: dict[str, list[str]] = {}
        if self.lag_threshold is None and self.dlq_threshold is None:
            message = "Set a lag threshold, a dead-letter threshold, or both."
            errors["lag_threshold"] = [message]
            errors["dlq_threshold"] = [message]
        if self.channel == AlertChannel.EMAIL and not self.email:
            errors["email"] = ["An e-mail alert needs an address."]
        if self.channel == AlertChannel.WEBHOOK and not self.webhook_url:
            errors["webhook_url"] = ["A webhook alert needs a URL."]
        same_tenant = self.group_id is None or self.group.tenant_id == self.tenant_id
        if self.tenant_id is not None and not same_tenant:
            errors["group"] = ["The consumer group is not in this tenant."]
        if errors:
            raise ValidationError(errors)


class AlertEvent(models.Model):
    """One alert that fired: what was measured, against which threshold, and whether it was delivered.

    Kept after its rule is deleted (the names are copied), like the audit log.
    """

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="alert_events")
    rule = models.ForeignKey(
        AlertRule, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    rule_name = models.CharField(max_length=100)
    group_name = models.CharField(max_length=100)
    metric = models.CharField(max_length=8, choices=AlertMetric.choices)
    value = models.PositiveBigIntegerField()
    threshold = models.PositiveBigIntegerField()
    channel = models.CharField(max_length=16, choices=AlertChannel.choices)
    target = models.CharField(max_length=500)
    delivered = models.BooleanField(default=False)
    delivery_error = models.TextField(blank=True)

    class Meta:
        ordering = ("-created", "-id")
        indexes = (models.Index(fields=("tenant", "-created"), name="tenants_alert_tenant_created"),)

    def __str__(self) -> str:
        return f"{self.rule_name}: {self.metric} {self.value} >= {self.threshold}"

    @property
    def summary(self) -> str:
        """One line for people: what reached which threshold."""
        what = "lag" if self.metric == AlertMetric.LAG else "dead letters"
        return f"{self.group_name} {what} at {self.value} (threshold {self.threshold})"
