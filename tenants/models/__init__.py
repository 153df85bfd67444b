"""Tenant models, one module per domain, re-exported here."""

from tenants.models.access import AccessKey
from tenants.models.acls import AclPolicy
from tenants.models.alerts import AlertEvent, AlertRule
from tenants.models.analytics import Invoice, InvoiceLine, JobRun, LagDaily, UsageDaily
from tenants.models.audit import AuditEvent
from tenants.models.clusters import BrokerCluster, BrokerGroup, BrokerNode
from tenants.models.lag import GroupLagSample
from tenants.models.provisioned import ProvisionedModel
from tenants.models.quotas import Quota
from tenants.models.tenants import Membership, Plan, Tenant
from tenants.models.topics import ConsumerGroup, Topic, TopicPlacement

__all__ = (
    "AccessKey",
    "AclPolicy",
    "AlertEvent",
    "AlertRule",
    "AuditEvent",
    "BrokerCluster",
    "BrokerGroup",
    "BrokerNode",
    "ConsumerGroup",
    "GroupLagSample",
    "Invoice",
    "InvoiceLine",
    "JobRun",
    "LagDaily",
    "Membership",
    "Plan",
    "ProvisionedModel",
    "Quota",
    "Tenant",
    "Topic",
    "TopicPlacement",
    "UsageDaily",
)
