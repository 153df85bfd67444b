"""Telemetry: the settings handshake and the server-to-client command stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf import duration_pb2

from dataplane.broker import Broker
from dataplane.clients import CLIENT_ID_HEADER, header
from dataplane.errors import BrokerError, status_of
from dataplane.filters import parse_sql
from dataplane.metadata import GroupConfig
from dataplane.names import namespace_from_metadata, resolve
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("backoff_policy", "merge_settings", "telemetry")

logger = logging.getLogger(__name__)

_CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
_CONSUMER_TYPES = {
    pb.ClientType.PUSH_CONSUMER,
    pb.ClientType.SIMPLE_CONSUMER,
    pb.ClientType.PULL_CONSUMER,
    pb.ClientType.LITE_PUSH_CONSUMER,
    pb.ClientType.LITE_SIMPLE_CONSUMER,
}


def _ms(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def backoff_policy(group: GroupConfig | None, max_attempts: int) -> pb.RetryPolicy:
    """The consumer retry policy of a group (RocketMQ's 1s..2h ladder by default)."""
    policy = pb.RetryPolicy(max_attempts=max_attempts)
    configured = group.retry_policy if group is not None else {}
    if "exponential" in configured:
        exp = configured["exponential"]
        policy.exponential_backoff.initial.CopyFrom(_ms(int(exp.get("initial_ms", 1000))))
        policy.exponential_backoff.max.CopyFrom(_ms(int(exp.get("max_ms", 7_200_000))))
        policy.exponential_backoff.multiplier = float(exp.get("multiplier", 2.0))
    else:
        delays = configured.get("customized", {}).get("delays_ms") or [s * 1000 for s in _CONSUMER_BACKOFF_S]
        policy.customized_backoff.next.extend(_ms(int(d)) for d in delays)
    return policy


def merge_settings(
    client: pb.Settings,
    *,
    max_body_bytes: int,
    group: GroupConfig | None = None,
    max_attempts: int = 16,
    long_polling_ms: int = 20_000,
) -> pb.Settings:
    """The client's Settings overlaid with the server-side values, as the proxy answers them."""
    merged = pb.Settings()
    merged.CopyFrom(client)
    if client.HasField("subscription") or client.client_type in _CONSUMER_TYPES:
        sub = merged.subscription
        sub.fifo = bool(group and group.fifo)
        sub.receive_batch_size = 32
        sub.long_polling_timeout.CopyFrom(_ms(long_polling_ms))
        merged.backoff_policy.CopyFrom(backoff_policy(group, max_attempts))
    else:
        merged.publishing.max_body_size = max_body_bytes
        merged.publishing.validate_message_type = True
        merged.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=3,
                exponential_backoff=pb.ExponentialBackoff(initial=_ms(10), max=_ms(1000), multiplier=2.0),
            )
        )
    merged.metric.Clear()
    merged.metric.on = False
    return merged


def _handle_settings(broker: Broker, settings: pb.Settings, header_ns: str, client_id: str) -> pb.Settings:
    session = broker.clients.get(client_id)
    group_config: GroupConfig | None = None
    topics: set[str] = set()
    group_name = ""
    if settings.HasField("subscription"):
        sub = settings.subscription
        if sub.HasField("group") and sub.group.name:
            group_name = resolve(sub.group, header_ns, kind="group")[1]
            group_config = broker.group(group_name)
        for entry in sub.subscriptions:
            topics.add(resolve(entry.topic, header_ns)[1])
            if entry.expression.type == pb.FilterType.SQL:
                parse_sql(entry.expression.expression)  # ILLEGAL_FILTER_EXPRESSION now, not at receive
    elif settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            topics.add(resolve(topic, header_ns)[1])
    if session is not None:
        session.settings = settings
        session.client_type = settings.client_type
        session.namespace = header_ns
        session.group = group_name or session.group
        session.topics = topics
    s = broker.settings
    long_polling = min(s.default_long_polling_ms, 20_000)
    return merge_settings(
        settings,
        max_body_bytes=s.max_body_bytes,
        group=group_config,
        max_attempts=broker.max_attempts(group_config) if group_config else s.max_delivery_attempts,
        long_polling_ms=max(long_polling, 5_000),
    )


async def telemetry(
    broker: Broker, requests: AsyncIterator[svc.TelemetryCommand], context: Any
) -> AsyncIterator[svc.TelemetryCommand]:
    """Answer each Settings with {status OK, merged settings}; keep the stream open for commands."""
    metadata = list(context.invocation_metadata() or ())
    header_ns = namespace_from_metadata(metadata)
    client_id = header(metadata, CLIENT_ID_HEADER)
    session = broker.clients.touch(metadata, context.peer())
    outbound: asyncio.Queue[svc.TelemetryCommand | None] = asyncio.Queue()
    if session is not None:
        session.outbound = outbound

    async def read() -> None:
        try:
            async for command in requests:
                if broker.clients.get(client_id) is not None:
                    broker.clients.touch(metadata, context.peer())
                if command.HasField("settings"):
                    try:
                        merged = _handle_settings(broker, command.settings, header_ns, client_id)
                        reply = svc.TelemetryCommand(
                            status=pb.Status(code=pb.Code.OK, message="OK"), settings=merged
                        )
                    except BrokerError as exc:
                        reply = svc.TelemetryCommand(status=status_of(exc))
                    outbound.put_nowait(reply)
                # thread_stack_trace / verify_message_result replies are accepted and dropped for now.
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a broken client stream ends that stream only
            logger.debug("telemetry stream of %s ended with an error", client_id, exc_info=True)
        finally:
            outbound.put_nowait(None)

    reader = asyncio.create_task(read())
    try:
        while True:
            item = await outbound.get()
            if item is None:
                break
            yield item
    finally:
        reader.cancel()
        current = broker.clients.get(client_id)
        if current is not None and current.outbound is outbound:
            current.outbound = None
            if broker.renewals and not broker.closing:  # its push-consumed messages, if it is gone
                broker.release_renewals_later(client_id)
