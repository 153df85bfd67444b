"""ACL policies in the shape of RocketMQ ACL 2.0."""

from __future__ import annotations

from django.db import models

from tenants.choices import AclDecision, AclPatternType, AclResourceType
from tenants.models.provisioned import ProvisionedModel
from tenants.models.tenants import Tenant

__all__ = ("AclPolicy",)


class AclPolicy(ProvisionedModel):
    """One ACL 2.0 entry: principal x resource (type, pattern) x actions x source CIDRs -> allow/deny.

    Resource names are tenant-relative; brokers qualify them with the tenant's namespace, so a
    policy can never reach another tenant's resources.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="acl_policies")
    principal = models.CharField(max_length=100, help_text="An access key id of the tenant, or '*'.")
    resource_type = models.CharField(max_length=16, choices=AclResourceType.choices)
    resource_pattern = models.CharField(
        max_length=16, choices=AclPatternType.choices, default=AclPatternType.LITERAL
    )
    resource_name = models.CharField(max_length=100, blank=True, help_text="Empty or '*' for every name.")
    actions = models.JSONField(default=list, help_text="ACL 2.0 actions: Pub, Sub, Create, ... or All.")
    source_cidrs = models.JSONField(default=list, blank=True, help_text="Empty allows any source address.")
    decision = models.CharField(max_length=8, choices=AclDecision.choices, default=AclDecision.ALLOW)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ("tenant", "principal", "resource_type", "resource_name")

    def __str__(self) -> str:
        return f"{self.decision} {self.principal} {self.resource_type}:{self.resource_name}"
