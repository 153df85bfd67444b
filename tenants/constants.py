"""Constants of the control plane: limits, defaults and retry timings."""

from __future__ import annotations

from datetime import timedelta

from mqcloud.admin_client import QUOTA_LIMITS

__all__ = (
    "ACCESS_KEY_ID_LENGTH",
    "ACCESS_KEY_ID_PREFIX",
    "ACCESS_KEY_ROTATION_OVERLAP",
    "ACCESS_KEY_SECRET_BYTES",
    "ALERT_DLQ_COUNT_CAP",
    "ALERT_RENOTIFY_AFTER",
    "ALERT_SIGNATURE_HEADER",
    "ALERT_SIGNING_SECRET_BYTES",
    "ALERT_SIGNING_SECRET_PREFIX",
    "ALERT_TEST_INTERVAL_S",
    "ALERT_TIMESTAMP_HEADER",
    "ALERT_WEBHOOK_TIMEOUT_S",
    "ANALYTICS_MAX_RETRIES",
    "ANALYTICS_RETRY_BACKOFF_S",
    "DEFAULT_MAX_DELIVERY_ATTEMPTS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_QUEUE_COUNT",
    "DEFAULT_RETENTION_HOURS",
    "LAG_HISTORY_MAX_POINTS",
    "LAG_HISTORY_RETENTION",
    "MAX_QUEUE_COUNT",
    "NAMESPACE_SEPARATOR",
    "PROVISION_MAX_RETRIES",
    "PROVISION_RETRY_BACKOFF_MAX_S",
    "PROVISION_RETRY_BACKOFF_S",
    "QUOTA_LIMIT_FIELDS",
    "RESOURCE_NAME_PATTERN",
    "SECRETS_HKDF_INFO",
)

# Qualified names on brokers are "{namespace}%{name}" (ARCHITECTURE.md, tenancy on the wire).
NAMESPACE_SEPARATOR = "%"
# RocketMQ's topic/group charset minus "%" and "|", which the broker reserves for qualification.
RESOURCE_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,100}$"

DEFAULT_QUEUE_COUNT = 8
MAX_QUEUE_COUNT = 256
DEFAULT_RETENTION_HOURS = 72
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_DELIVERY_ATTEMPTS = 16

ACCESS_KEY_ID_PREFIX = "AK"
ACCESS_KEY_ID_LENGTH = 20
ACCESS_KEY_SECRET_BYTES = 30
# How long the old key keeps working after a rotation unless the request says otherwise.
ACCESS_KEY_ROTATION_OVERLAP = timedelta(hours=24)
SECRETS_HKDF_INFO = b"mqcloud.access-key-secrets.v1"

# A broker that is down for a deploy usually comes back within a minute; past ~10 minutes the
# periodic reconcile takes over, so the task gives up rather than piling up retries.
PROVISION_MAX_RETRIES = 6
# A failed Spark run is retried a few times, minutes apart (a busy cluster, a late object store).
ANALYTICS_MAX_RETRIES = 3
ANALYTICS_RETRY_BACKOFF_S = 300
PROVISION_RETRY_BACKOFF_S = 5
PROVISION_RETRY_BACKOFF_MAX_S = 300

# The limits a Plan defaults and a Quota overrides; same names on both models and on the wire.
QUOTA_LIMIT_FIELDS = QUOTA_LIMITS

# Alert rules: dead letters are counted by listing them and a broker lists at most 256 per call, so
# the count (and a threshold) stops there.
ALERT_DLQ_COUNT_CAP = 256
# A rule that stays firing notifies again after this long, not at every evaluation.
ALERT_RENOTIFY_AFTER = timedelta(hours=1)
# "Send a test notification" works once a minute per rule (no flooding an address through it).
ALERT_TEST_INTERVAL_S = 60
# A webhook receiver that hangs must not hold the evaluation of every other rule.
ALERT_WEBHOOK_TIMEOUT_S = 5.0
# Webhook signing: each rule has its own secret; every POST carries the HMAC-SHA256 of its raw body
# under the secret (``sha256=<hex>``) and the send time in Unix seconds (also ``sent_at`` in the body,
# so the signature covers it and receivers can refuse replays).
ALERT_SIGNING_SECRET_PREFIX = "whsec_"
ALERT_SIGNING_SECRET_BYTES = 32
ALERT_SIGNATURE_HEADER = "X-MQCloud-Signature"
ALERT_TIMESTAMP_HEADER = "X-MQCloud-Timestamp"

# Lag history (one sample per group per minute): kept a week, about 10k rows per group.
LAG_HISTORY_RETENTION = timedelta(days=7)
# A chart gets at most this many points; longer ranges keep each bucket's highest lag.
LAG_HISTORY_MAX_POINTS = 360
