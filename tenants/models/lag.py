"""Consumer lag history: one sample per consumer group per minute, for the group page's chart."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from tenants.models.tenants import Tenant
from tenants.models.topics import ConsumerGroup

__all__ = ("GroupLagSample",)


class GroupLagSample(models.Model):
    """A group's lag over all its queues at one moment, as its brokers reported it.

    Written by ``tenants.sample_group_lag`` (Celery beat) and pruned after ``LAG_HISTORY_RETENTION``;
    goes with its group. ``consumed`` is the sum of committed offsets, so two samples give a rate.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="lag_samples")
    group = models.ForeignKey(ConsumerGroup, on_delete=models.CASCADE, related_name="lag_samples")
    sampled_at = models.DateTimeField(default=timezone.now)
    total_lag = models.BigIntegerField()
    max_lag_ms = models.BigIntegerField(default=0, help_text="Age of the oldest unconsumed message.")
    consumed = models.BigIntegerField(default=0)

    class Meta:
        ordering = ("group", "sampled_at")
        indexes = (models.Index(fields=("group", "sampled_at"), name="tenants_lagsample_group_at"),)

    def __str__(self) -> str:
        return f"{self.group_id}@{self.sampled_at:%Y-%m-%d %H:%M}: {self.total_lag}"
