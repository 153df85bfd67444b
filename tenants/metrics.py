"""The control plane's Prometheus endpoint (``/metrics``): process metrics plus gauges read from the
database at scrape time (tenants by status, provisioned objects by kind and status, broker nodes)."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

__all__ = ("metrics_view",)


class _ControlPlaneCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count

        from tenants.models import AccessKey, AclPolicy, BrokerNode, ConsumerGroup, Quota, Tenant, Topic

        tenants = GaugeMetricFamily("mq_control_plane_tenants", "Tenants by status", labels=["status"])
        for row in Tenant.objects.values("status").annotate(n=Count("id")):
            tenants.add_metric([str(row["status"])], row["n"])
        yield tenants
        objects = GaugeMetricFamily(
            "mq_control_plane_objects", "Provisioned objects by kind and status", labels=["kind", "status"]
        )
        for model in (Topic, ConsumerGroup, AccessKey, AclPolicy, Quota):
            for row in model.objects.values("status").annotate(n=Count("id")):
                objects.add_metric([model.__name__, str(row["status"])], row["n"])
        yield objects
        nodes = GaugeMetricFamily(
            "mq_control_plane_broker_nodes", "Broker nodes by enabled", labels=["enabled"]
        )
        for node_row in BrokerNode.objects.values("enabled").annotate(n=Count("id")):
            nodes.add_metric([str(node_row["enabled"]).lower()], node_row["n"])
        yield nodes


_REGISTRY = CollectorRegistry()
ProcessCollector(registry=_REGISTRY)
PlatformCollector(registry=_REGISTRY)
_REGISTRY.register(_ControlPlaneCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(_REGISTRY), content_type=CONTENT_TYPE_LATEST)
