"""Messages through the control plane: query, test send, trace; a group's offset reset, dead letters
and their redrive (docs/control-plane.md, "Data-plane views"). Brokers are reached through the
gateway; offset resets and redrives are audited."""

from __future__ import annotations

import base64
import hashlib
import itertools
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from tenants.choices import AuditAction, TenantStatus
from tenants.errors import BrokerUnavailable, InvalidState
from tenants.models import BrokerNode, ConsumerGroup, Topic
from tenants.services.audit import Actor, record_event
from tenants.services.gateway_views import MessageDraft, MessageQuery, MessageRecord
from tenants.services.observe import group_nodes, iso_ms, relative, topic_nodes
from tenants.services.provisioning import get_gateway

__all__ = (
    "list_dead_letters",
    "message_trace",
    "message_view",
    "query_messages",
    "redrive_dead_letters",
    "reset_offset",
    "send_test_message",
)

_round_robin = itertools.count()


def message_view(m: MessageRecord, broker: str) -> dict[str, Any]:
    """A message as the API shows it (topic tenant-relative, body in base64)."""
    return {
        "message_id": m.message_id,
        "topic": relative(m.topic),
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "broker": broker,
        "tag": m.tag,
        "keys": list(m.keys),
        "message_group": m.message_group,
        "born_time": iso_ms(m.born_ms),
        "store_time": iso_ms(m.store_ms),
        "delivery_time": iso_ms(m.delivery_ms),
        "body_base64": base64.b64encode(m.body).decode(),
        "body_size": len(m.body),
        "properties": dict(m.properties),
        "system_properties": dict(m.system_properties),
    }


def query_messages(topic: Topic, query: MessageQuery, broker: str | None = None) -> list[dict[str, Any]]:
    """Messages of the topic by id, key, time range or queue offset (``broker`` narrows a queue query)."""
    gw = get_gateway()
    rows: list[tuple[int, dict[str, Any]]] = []
    for node in topic_nodes(topic):
        if broker is not None and node.group.name != broker:
            continue
        for m in gw.query_messages(node.endpoint, topic.qualified_name, query):
            rows.append((m.store_ms, message_view(m, node.group.name)))
    rows.sort(key=lambda r: r[0])
    return [view for _, view in rows[: query.limit]]


def _pick_node(topic: Topic, message_group: str) -> BrokerNode:
    nodes = topic_nodes(topic)
    if not nodes:
        raise BrokerUnavailable(f"No broker serves topic '{topic.name}' yet.")
    if message_group:  # one message group always lands on the same broker (and queue)
        h = int.from_bytes(hashlib.sha256(message_group.encode()).digest()[:8], "big")
        return nodes[h % len(nodes)]
    return nodes[next(_round_robin) % len(nodes)]


def send_test_message(topic: Topic, draft: MessageDraft) -> dict[str, Any]:
    """Send one message to the topic (the console's and CLI's "send a test message")."""
    if topic.tenant.status == TenantStatus.SUSPENDED:
        raise InvalidState(f"Tenant '{topic.tenant.namespace}' is suspended.")
    node = _pick_node(topic, draft.message_group)
    sent = get_gateway().send_message(node.endpoint, topic.qualified_name, draft)
    return {
        "message_id": sent.message_id,
        "queue_id": sent.queue_id,
        "queue_offset": sent.queue_offset,
        "broker": node.group.name,
    }


def message_trace(topic: Topic, message_id: str) -> list[dict[str, Any]] | None:
    """Every recorded event of the message, oldest first; None when no broker knows it."""
    gw = get_gateway()
    found = [
        e
        for node in topic_nodes(topic)
        for e in gw.message_trace(node.endpoint, topic.qualified_name, message_id)
    ]
    if not found:
        return None
    found.sort(key=lambda e: e.time_ms)
    return [
        {
            "event": e.event,
            "time": iso_ms(e.time_ms),
            "group": relative(e.group) if e.group else None,
            "attempt": e.attempt or None,
            "client_id": e.client_id or None,
            "detail": e.detail,
        }
        for e in found
    ]


@transaction.atomic
def reset_offset(
    actor: Actor, group: ConsumerGroup, topic: Topic, to: str, time_ms: int = 0
) -> list[dict[str, Any]]:
    """Move the group's offsets on the topic (beginning, end or a time); live consumers follow at once."""
    nodes = topic_nodes(topic)
    if not nodes:
        raise BrokerUnavailable(f"No broker serves topic '{topic.name}' yet.")
    gw = get_gateway()
    queues = [
        {"broker": node.group.name, "queue_id": qid, "offset": offset}
        for node in nodes
        for qid, offset in gw.reset_offset(
            node.endpoint, group.qualified_name, topic.qualified_name, to, time_ms
        )
    ]
    record_event(
        actor,
        AuditAction.UPDATE,
        group,
        after={"reset_offset": {"topic": topic.name, "to": to, "time_ms": time_ms or None, "queues": queues}},
    )
    return queues


def list_dead_letters(group: ConsumerGroup, limit: int) -> list[dict[str, Any]]:
    """The group's dead letters not yet re-driven, from every broker of its cluster."""
    gw = get_gateway()
    rows: list[tuple[int, dict[str, Any]]] = []
    for node in group_nodes(group):
        for m in gw.list_dead_letters(node.endpoint, group.qualified_name, limit):
            rows.append((m.store_ms, message_view(m, node.group.name)))
    rows.sort(key=lambda r: r[0])
    return [view for _, view in rows[:limit]]


@transaction.atomic
def redrive_dead_letters(actor: Actor, group: ConsumerGroup, message_ids: Iterable[str], all_: bool) -> int:
    """Send dead letters back to their original topic, for this group only; returns how many."""
    ids = list(message_ids)
    gw = get_gateway()
    count = sum(gw.redrive(node.endpoint, group.qualified_name, ids, all_) for node in group_nodes(group))
    record_event(
        actor,
        AuditAction.UPDATE,
        group,
        after={"redrive": {"message_ids": ids[:100], "all": all_, "redriven": count}},
    )
    return count
