"""Choice sets for tenant-owned models and the broker registry."""

from django.db import models

__all__ = (
    "AccessKeyStatus",
    "AclAction",
    "AclDecision",
    "AclPatternType",
    "AclResourceType",
    "AlertChannel",
    "AlertMetric",
    "AnalyticsJob",
    "AuditAction",
    "BrokerHealth",
    "JobRunStatus",
    "JobTrigger",
    "MembershipRole",
    "ProvisioningStatus",
    "RetryPolicy",
    "TenantStatus",
    "TopicMessageType",
)


class TenantStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"


class MembershipRole(models.TextChoices):
    """A member's role in one tenant, strongest first."""

    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    DEVELOPER = "developer", "Developer"
    VIEWER = "viewer", "Viewer"


class ProvisioningStatus(models.TextChoices):
    """Where a resource's desired state stands against the brokers (see docs/control-plane.md)."""

    PROVISIONING = "provisioning", "Provisioning"
    ACTIVE = "active", "Active"
    ERROR = "error", "Error"
    DELETING = "deleting", "Deleting"


class TopicMessageType(models.TextChoices):
    """RocketMQ 5 topic message types; MIXED accepts all of them."""

    NORMAL = "NORMAL", "Normal"
    FIFO = "FIFO", "FIFO"
    DELAY = "DELAY", "Delay"
    TRANSACTION = "TRANSACTION", "Transaction"
    MIXED = "MIXED", "Mixed"


class RetryPolicy(models.TextChoices):
    EXPONENTIAL = "EXPONENTIAL", "Exponential backoff"
    CUSTOMIZED = "CUSTOMIZED", "Customized (fixed steps)"


class AccessKeyStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    REVOKED = "revoked", "Revoked"


class AclResourceType(models.TextChoices):
    """RocketMQ ACL 2.0 resource types."""

    ANY = "Any", "Any"
    CLUSTER = "Cluster", "Cluster"
    NAMESPACE = "Namespace", "Namespace"
    TOPIC = "Topic", "Topic"
    GROUP = "Group", "Group"


class AclPatternType(models.TextChoices):
    LITERAL = "LITERAL", "Literal"
    PREFIXED = "PREFIXED", "Prefixed"


class AclAction(models.TextChoices):
    """RocketMQ ACL 2.0 actions."""

    ALL = "All", "All"
    PUB = "Pub", "Publish"
    SUB = "Sub", "Subscribe"
    CREATE = "Create", "Create"
    UPDATE = "Update", "Update"
    DELETE = "Delete", "Delete"
    GET = "Get", "Get"
    LIST = "List", "List"


class AclDecision(models.TextChoices):
    ALLOW = "Allow", "Allow"
    DENY = "Deny", "Deny"


class BrokerHealth(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    HEALTHY = "healthy", "Healthy"
    UNREACHABLE = "unreachable", "Unreachable"


class AuditAction(models.TextChoices):
    CREATE = "create", "Create"
    UPDATE = "update", "Update"
    DELETE = "delete", "Delete"
    ROTATE = "rotate", "Rotate"
    REVOKE = "revoke", "Revoke"


class AnalyticsJob(models.TextChoices):
    """The nightly Spark jobs (analytics/)."""

    BILLING = "billing", "Billing"
    LAG = "lag", "Consumer lag"


class JobRunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped (the same job and day was already running)"


class JobTrigger(models.TextChoices):
    SCHEDULE = "schedule", "Nightly schedule"
    MANUAL = "manual", "On demand"


class AlertChannel(models.TextChoices):
    """How an alert rule notifies."""

    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook (JSON POST)"


class AlertMetric(models.TextChoices):
    """What an alert rule watches on its consumer group."""

    LAG = "lag", "Lag (messages)"
    DLQ = "dlq", "Dead letters"
