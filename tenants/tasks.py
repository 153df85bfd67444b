"""Celery tasks of the control plane: thin wrappers that take ids and call services.provisioning."""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from celery import shared_task

from tenants.choices import JobTrigger
from tenants.constants import (
    ANALYTICS_MAX_RETRIES,
    ANALYTICS_RETRY_BACKOFF_S,
    PROVISION_MAX_RETRIES,
    PROVISION_RETRY_BACKOFF_MAX_S,
    PROVISION_RETRY_BACKOFF_S,
)
from tenants.errors import AnalyticsJobFailed, BrokerUnavailable
from tenants.services import alerts, analytics, lag_history, provisioning

__all__ = (
    "evaluate_alert_rules_task",
    "provision_resource_task",
    "push_tenant_quotas_task",
    "reconcile_brokers_task",
    "reconcile_node_task",
    "run_analytics_job_task",
    "sample_group_lag_task",
)

logger = logging.getLogger(__name__)


def _backoff(retries: int) -> int:
    return int(min(PROVISION_RETRY_BACKOFF_MAX_S, PROVISION_RETRY_BACKOFF_S * 2**retries))


def _run_with_retries(task: Any, fn: Any, *args: Any) -> tuple[bool, Any]:
    """Run ``fn``; on BrokerUnavailable schedule a retry with exponential backoff.

    Eager runs (tests) cannot schedule, so they retry inline, without sleeping. Returns (ok, result).
    """
    attempts = task.max_retries + 1 if task.request.is_eager else 1
    error: BrokerUnavailable | None = None
    for _ in range(attempts):
        try:
            return True, fn(*args)
        except BrokerUnavailable as exc:
            error = exc
    if task.request.is_eager or task.request.retries >= task.max_retries:
        logger.warning("giving up on %s%r; reconcile will retry: %s", task.name, args, error)
        return False, None
    raise task.retry(exc=error, countdown=_backoff(task.request.retries))


@shared_task(bind=True, name="tenants.provision_resource", max_retries=PROVISION_MAX_RETRIES, trail=False)
def provision_resource_task(self: Any, kind: str, pk: int) -> str:
    """Apply one topic/group/key/ACL/quota to its brokers; retried with exponential backoff."""
    ok, result = _run_with_retries(self, provisioning.provision, kind, pk)
    return str(result) if ok else "error"


@shared_task(bind=True, name="tenants.push_tenant_quotas", max_retries=PROVISION_MAX_RETRIES, trail=False)
def push_tenant_quotas_task(self: Any, tenant_id: int) -> int:
    """Re-push a tenant's effective limits (after a plan or quota change)."""
    ok, result = _run_with_retries(self, provisioning.push_tenant_quotas, tenant_id)
    return int(result) if ok else 0


@shared_task(name="tenants.reconcile_node", trail=False)
def reconcile_node_task(node_id: int) -> int:
    """Reconcile one node now (e.g. right after it is registered)."""
    from tenants.models import BrokerNode

    node = BrokerNode.objects.select_related("group").filter(pk=node_id, enabled=True).first()
    if node is None:
        return 0
    report = provisioning.reconcile_node(node)
    # what it repaired is drift an operator traces, as the periodic pass logs its own
    logger.info("reconcile of %s: %s", node.name, provisioning.describe(report))
    return report.nodes_ok


@shared_task(name="tenants.reconcile_brokers", trail=False)
def reconcile_brokers_task() -> dict[str, int]:
    """The periodic repair (Celery beat, ``MQ_RECONCILE_INTERVAL_S``): desired vs actual on every node."""
    report = provisioning.reconcile_brokers()
    return {
        "nodes_ok": report.nodes_ok,
        "nodes_unreachable": report.nodes_unreachable,
        "repaired": len(report.repaired),
        "removed": len(report.removed),
        "retried": report.retried,
    }


@shared_task(bind=True, name="tenants.run_analytics_job", max_retries=ANALYTICS_MAX_RETRIES, trail=False)
def run_analytics_job_task(
    self: Any, job: str, day: str | None = None, trigger: str = JobTrigger.MANUAL
) -> dict[str, Any]:
    """Run a Spark job for a day (yesterday when none; Celery beat runs both nightly) and load it.

    A failed run is recorded on its JobRun and retried ``ANALYTICS_MAX_RETRIES`` times, minutes
    apart; eager runs (tests) do not retry, a Spark run being too slow to repeat inline.
    """
    the_day = date.fromisoformat(day) if day else None
    try:
        run = analytics.run_analytics_job(job, the_day, trigger, attempt=self.request.retries + 1)
    except AnalyticsJobFailed as exc:
        if self.request.is_eager or self.request.retries >= self.max_retries:
            logger.warning(
                "giving up on %s %s after %d attempts: %s", job, day, self.request.retries + 1, exc
            )
            return {"status": "failed", "error": exc.message}
        raise self.retry(exc=exc, countdown=ANALYTICS_RETRY_BACKOFF_S * 2**self.request.retries) from exc
    return {"status": run.status, "job_run": run.pk}


@shared_task(name="tenants.evaluate_alert_rules", trail=False)
def evaluate_alert_rules_task() -> dict[str, Any]:
    """The periodic alert check (Celery beat, every minute): thresholds against the brokers' figures."""
    report = alerts.evaluate_alert_rules()
    return {
        "rules": report.rules,
        "firing": report.firing,
        "notified": report.notified,
        "failed": report.failed,
        "unreachable_groups": report.unreachable_groups,
    }


@shared_task(name="tenants.sample_group_lag", trail=False)
def sample_group_lag_task() -> dict[str, Any]:
    """Record every active group's lag (Celery beat, every minute) for the lag-over-time charts."""
    report = lag_history.sample_group_lag()
    return {"sampled": report.sampled, "pruned": report.pruned, "unreachable": report.unreachable}
