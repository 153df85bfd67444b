"""Consumer lag over time: sampled from the brokers every minute, kept a week, charted per group."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from tenants.choices import ProvisioningStatus
from tenants.constants import LAG_HISTORY_MAX_POINTS, LAG_HISTORY_RETENTION
from tenants.errors import BrokerUnavailable
from tenants.models import ConsumerGroup, GroupLagSample
from tenants.services.observe import group_lag

__all__ = ("HISTORY_RANGES", "LagPoint", "SamplingReport", "lag_history", "sample_group_lag")

logger = logging.getLogger(__name__)

# The ranges the group page offers, by their URL value.
HISTORY_RANGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}


@dataclass(frozen=True, slots=True)
class LagPoint:
    at: datetime
    lag: int
    lag_ms: int


@dataclass(slots=True)
class SamplingReport:
    sampled: int = 0
    pruned: int = 0
    unreachable: list[str] = field(default_factory=list)


def sample_group_lag(now: datetime | None = None) -> SamplingReport:
    """Record the lag of every active consumer group now; forget samples past the retention.

    A group whose brokers do not answer gets no sample (a gap in the chart, not a false zero).
    """
    now = now or timezone.now()
    report = SamplingReport()
    groups = ConsumerGroup.objects.filter(status=ProvisioningStatus.ACTIVE).select_related("tenant")
    for group in groups.order_by("pk"):
        try:
            lag = group_lag(group)
        except BrokerUnavailable as exc:
            logger.warning("no lag sample of %s: %s", group.qualified_name, exc.message)
            report.unreachable.append(group.qualified_name)
            continue
        queues = lag["queues"]
        GroupLagSample.objects.create(
            tenant=group.tenant,
            group=group,
            sampled_at=now,
            total_lag=lag["total_lag"],
            max_lag_ms=max((q["lag_ms"] for q in queues), default=0),
            consumed=sum(q["committed_offset"] for q in queues),
        )
        report.sampled += 1
    report.pruned, _ = GroupLagSample.objects.filter(sampled_at__lt=now - LAG_HISTORY_RETENTION).delete()
    return report


def lag_history(
    group: ConsumerGroup,
    span: timedelta,
    now: datetime | None = None,
    max_points: int = LAG_HISTORY_MAX_POINTS,
) -> list[LagPoint]:
    """The group's samples over the last ``span``, oldest first; at most ``max_points``, each bucket
    keeping its highest lag (a spike must stay visible when a week is squeezed into a chart)."""
    now = now or timezone.now()
    rows = list(
        GroupLagSample.objects.filter(group=group, sampled_at__gte=now - span, sampled_at__lte=now)
        .order_by("sampled_at")
        .values_list("sampled_at", "total_lag", "max_lag_ms")
    )
    points = [LagPoint(at, lag, ms) for at, lag, ms in rows]
    if len(points) <= max_points:
        return points
    size = -(-len(points) // max_points)  # ceiling division
    return [max(points[i : i + size], key=lambda p: p.lag) for i in range(0, len(points), size)]
