"""The operator's broker registry: clusters of broker groups of nodes."""

from __future__ import annotations

from django.db import models

from tenants.choices import BrokerHealth

__all__ = ("BrokerCluster", "BrokerGroup", "BrokerNode")


class BrokerCluster(models.Model):
    """A set of broker groups that serve tenants together; topics spread over its groups."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    is_default = models.BooleanField(default=False, help_text="Hosts tenants that name no cluster.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        constraints = (
            models.UniqueConstraint(
                fields=("is_default",),
                condition=models.Q(is_default=True),
                name="%(app_label)s_%(class)s_one_default",
                violation_error_message="Only one cluster can be the default.",
            ),
        )

    def __str__(self) -> str:
        return self.name


class BrokerGroup(models.Model):
    """A master and its replicas (RocketMQ's brokerName); the unit queues are placed on."""

    cluster = models.ForeignKey(BrokerCluster, on_delete=models.PROTECT, related_name="groups")
    name = models.SlugField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("cluster", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("cluster", "name"),
                name="%(app_label)s_%(class)s_unique_cluster_name",
                violation_error_message="A broker group with this name exists in the cluster.",
            ),
        )

    def __str__(self) -> str:
        return self.name


class BrokerNode(models.Model):
    """One broker process; the control plane reaches it through its admin gRPC endpoint."""

    group = models.ForeignKey(BrokerGroup, on_delete=models.CASCADE, related_name="nodes")
    name = models.SlugField(max_length=64, unique=True)
    broker_id = models.PositiveIntegerField(default=0, help_text="0 for the master, as in RocketMQ.")
    endpoint = models.CharField(max_length=255, help_text="HOST:PORT of the gRPC (client + admin) server.")
    metrics_endpoint = models.CharField(max_length=255, blank=True)
    enabled = models.BooleanField(default=True, help_text="Disabled nodes are skipped by provisioning.")
    health = models.CharField(max_length=16, choices=BrokerHealth.choices, default=BrokerHealth.UNKNOWN)
    health_message = models.TextField(blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    last_reconciled = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("group", "broker_id", "name")
        constraints = (
            models.UniqueConstraint(
                fields=("group", "broker_id"),
                name="%(app_label)s_%(class)s_unique_group_broker_id",
                violation_error_message="This broker id is taken in the group.",
            ),
        )

    def __str__(self) -> str:
        return self.name
