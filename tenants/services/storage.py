"""Storage a tenant holds on its brokers against its quota (``storage_bytes``), for the overview.

Each broker counts the bytes every tenant holds and exports them as ``mq_tenant_storage_bytes``
on its Prometheus endpoint (the same count its storage quota enforces). The control plane reads
that endpoint of one node per broker group (the master: replicas hold copies) of the tenant's
cluster. Nodes registered without a metrics endpoint, or not answering, are reported, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tenants.models import Tenant
from tenants.services.limits import effective_limits
from tenants.services.observe import cluster_nodes
from tenants.services.placement import cluster_for

__all__ = ("StorageUsage", "tenant_storage")

STORAGE_METRIC = "mq_tenant_storage_bytes"
# The overview waits at most this long per broker's metrics endpoint.
SCRAPE_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class StorageUsage:
    """Bytes held (None when no broker could tell) against the limit in force."""

    used_bytes: int | None
    limit_bytes: int
    brokers_counted: int
    problems: list[str] = field(default_factory=list)

    @property
    def percent(self) -> int:
        if self.used_bytes is None:
            return 0
        return 100 if self.limit_bytes <= 0 else min(100, round(100 * self.used_bytes / self.limit_bytes))


def _scrape(metrics_endpoint: str, namespace: str) -> int:
    url = metrics_endpoint if "://" in metrics_endpoint else f"http://{metrics_endpoint}"
    response = httpx.get(url.rstrip("/") + "/metrics", timeout=SCRAPE_TIMEOUT_S)
    response.raise_for_status()
    for family in text_string_to_metric_families(response.text):
        if family.name == STORAGE_METRIC:
            return int(sum(s.value for s in family.samples if s.labels.get("tenant") == namespace))
    return 0


def tenant_storage(tenant: Tenant) -> StorageUsage:
    """What the tenant's brokers say it holds now, and its ``storage_bytes`` limit."""
    limit = effective_limits(tenant)["storage_bytes"]
    cluster = cluster_for(tenant)
    if cluster is None:
        return StorageUsage(None, limit, 0, ["The tenant has no broker cluster yet."])
    nodes = cluster_nodes(cluster.pk)
    used, counted, problems = 0, 0, []
    for node in nodes:
        if not node.metrics_endpoint:
            problems.append(
                f"Broker {node.name} has no metrics endpoint registered; an operator can add it "
                "to the node (its --metrics-listen address)."
            )
            continue
        try:
            used += _scrape(node.metrics_endpoint, tenant.namespace)
            counted += 1
        except (httpx.HTTPError, ValueError) as exc:
            problems.append(f"Broker {node.name} did not report its storage: {exc}")
    return StorageUsage(used if counted else None, limit, counted, problems)
