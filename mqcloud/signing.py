"""Request metadata and the ``MQv2-HMAC-SHA1`` signature, as RocketMQ 5 clients send them.

``Signature = hex(HMAC-SHA1(key=secret, msg=x-mq-date-time))``; the date is
``YYYYMMDDTHHMMSSZ`` in UTC (the official Python client uses local time with a literal ``Z``; we
send real UTC, as the Node client does).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import UTC, datetime

from mqcloud.config import ClientConfig

__all__ = ("SDK_VERSION", "build_metadata", "format_datetime", "sign")

SDK_VERSION = "0.1.0"
ALGORITHM = "MQv2-HMAC-SHA1"


def format_datetime(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


def sign(secret: str, date_time: str) -> str:
    """Lower-case hex HMAC-SHA1 of ``date_time`` keyed by ``secret``."""
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def build_metadata(
    config: ClientConfig,
    client_id: str,
    *,
    now: datetime | None = None,
    request_id: str | None = None,
) -> list[tuple[str, str]]:
    """gRPC metadata for one call (or one stream opening)."""
    date_time = format_datetime(now)
    md = [
        ("x-mq-client-id", client_id),
        ("x-mq-request-id", request_id or str(uuid.uuid4())),
        ("x-mq-date-time", date_time),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "v2"),
        ("x-mq-client-version", SDK_VERSION),
        ("x-mq-namespace", config.namespace),
    ]
    creds = config.credentials
    if creds is not None and creds.access_key and creds.access_secret:
        md.append(
            (
                "authorization",
                f"{ALGORITHM} Credential={creds.access_key}, SignedHeaders=x-mq-date-time, "
                f"Signature={sign(creds.access_secret, date_time)}",
            )
        )
        if creds.security_token:
            md.append(("x-mq-session-token", creds.security_token))
    return md
