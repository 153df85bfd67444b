"""The broker's side of HA (``dataplane/ha``): building the node, gating writes, routes, metadata.

Kept out of ``dataplane/ha`` because it knows the broker (metadata, v2 error codes); ``dataplane/ha``
knows only the store. SendMessage calls :func:`before_put` (refuse at once: not the master, lease
expired, or fewer in-sync replicas than ``min_in_sync_replicas``) and :func:`after_put` (wait until
enough replicas hold the batch, bounded by ``ha_ack_timeout_ms``). Never a silent downgrade: a
batch that could not get its copies answers HA_NOT_AVAILABLE or SLAVE_PERSISTENCE_TIMEOUT.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dataplane.errors import BrokerError
from dataplane.ha.auth import replication_key
from dataplane.ha.node import HANode, HANodeConfig
from dataplane.metadata import GroupConfig, MetadataStore, TopicConfig, TopicType
from dataplane.metrics import watch_ha
from dataplane.pop_replication import PopReplicator
from dataplane.receipt import ReceiptCodec
from dataplane.store.message import MessageToStore, PutResult
from dataplane.store.status import PutMessageStatus
from dataplane.timer import RecallCodec
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

if TYPE_CHECKING:
    from dataplane.broker import Broker

__all__ = (
    "HaNotAvailable",
    "SlavePersistenceTimeout",
    "after_put",
    "apply_snapshot",
    "before_put",
    "build_ha",
    "ha_status",
    "reconnect_clients",
    "route_target",
    "take_snapshot",
)

logger = logging.getLogger(__name__)


class HaNotAvailable(BrokerError):
    code = pb.Code.HA_NOT_AVAILABLE


class SlavePersistenceTimeout(BrokerError):
    code = pb.Code.SLAVE_PERSISTENCE_TIMEOUT


def build_ha(broker: Broker) -> HANode | None:
    """The HA node of a broker configured with controllers; None for a standalone broker."""
    s = broker.settings
    controllers = [a.strip() for a in s.controller.split(",") if a.strip()]
    if not controllers:
        return None
    config = HANodeConfig(
        group=s.broker_name,
        node=s.ha_node or s.listen,
        address=s.advertise or s.listen,
        ha_listen=s.ha_listen,
        controllers=controllers,
        data_dir=s.data_dir,
        key=replication_key(
            s.ha_secret.get_secret_value() if s.ha_secret else None,
            s.admin_token.get_secret_value() if s.admin_token else None,
            s.dev_mode,
        ),
        heartbeat_interval_s=s.ha_heartbeat_interval_ms / 1000,
        in_sync_timeout_s=s.ha_in_sync_timeout_ms / 1000,
        max_gap_bytes=s.ha_max_gap_bytes,
        ha_advertise=s.ha_advertise,
    )
    store = broker.store
    store.writable = False  # until the controller names this node the master
    offsets = store.consumer_offsets
    pop_replicator: PopReplicator | None = None
    timers = getattr(broker, "timers", None)

    def promoted() -> None:
        if pop_replicator is not None:
            pop_replicator.catch_up()
        # Half messages that arrived by replication are not in the check service's memory yet.
        if broker.transactions is not None:
            try:
                broker.transactions.recover()
            except Exception:
                logger.exception("transaction recovery after promotion failed")

    def truncated(offset: int) -> None:
        if pop_replicator is not None:
            pop_replicator.rebuild()
        if timers is not None:
            timers.on_truncated()

    node = HANode(
        store,
        config,
        meta_snapshot=lambda: take_snapshot(broker.metadata, offsets),
        apply_meta=lambda snap: apply_snapshot(broker.metadata, offsets, snap),
        on_promoted=promoted,
        on_truncated=truncated,
        on_role_change=lambda: reconnect_clients(broker),
    )
    watch_ha(node)
    # Receipt and recall handles are signed with a key of the group, so a handle issued by the old
    # master is accepted by the new one (their POP state and timers replicate through the CommitLog).
    if hasattr(broker, "receipts"):
        key = hmac.digest(config.key, b"mqcloud-receipt-handles", "sha256")
        broker.receipts = ReceiptCodec(key, broker.settings.receipt_handle_version)
        broker.recalls = RecallCodec(hmac.digest(config.key, b"mqcloud-recall-handles", "sha256"))
    pop = getattr(broker, "pop", None)
    if pop is not None:
        pop_replicator = PopReplicator(pop, store, config.node, node.writable)
        pop_replicator.start(broker._loop)
    if timers is not None:
        timers.can_deliver = node.writable
        timers.publish_progress = True
    if hasattr(store, "set_tier_hooks"):  # tiered storage: only a writable master offloads, and
        # only what the SyncStateSet holds (docs/tiered-storage.md)
        store.set_tier_hooks(confirmed_offset=node.confirmed_offset, is_master=node.writable)
    return node


def reconnect_clients(broker: Broker) -> int:
    """Tell every client with a Telemetry stream here to reconnect (ReconnectEndpointsCommand): the
    group's master changed, so its routes are stale. Returns how many were told."""
    clients = getattr(broker, "clients", None)
    if clients is None:
        return 0
    command = svc.TelemetryCommand(
        reconnect_endpoints_command=svc.ReconnectEndpointsCommand(nonce=uuid.uuid4().hex)
    )
    told = 0
    for session in clients.sessions():
        if session.outbound is not None:
            session.outbound.put_nowait(command)
            told += 1
    if told:
        logger.info("role change: asked %d client(s) to reconnect", told)
    return told


def _required(broker: Broker, msgs: Sequence[MessageToStore]) -> int:
    s = broker.settings
    need = s.min_in_sync_replicas
    per_topic = s.min_in_sync_replicas_per_topic
    if per_topic:
        for msg in msgs:
            need = max(
                need, per_topic.get(msg.topic, 0), per_topic.get(msg.properties.get("REAL_TOPIC", ""), 0)
            )
    return need


def before_put(broker: Broker, msgs: Sequence[MessageToStore]) -> int:
    """Replicas (besides this master) that must confirm the batch; raises when it cannot happen."""
    ha = broker.ha
    assert ha is not None
    if not ha.writable():
        raise HaNotAvailable(ha.why_not_writable())
    replicas = _required(broker, msgs) - 1
    have = ha.in_sync_replicas()
    if have < replicas:
        raise HaNotAvailable(
            f"min_in_sync_replicas is {replicas + 1}; only {have + 1} node(s) of the group are in sync"
        )
    return replicas


async def after_put(broker: Broker, result: PutResult, replicas: int) -> PutResult:
    """``result`` when ``replicas`` replicas hold the batch and the lease still holds, else a failure."""
    ha = broker.ha
    assert ha is not None
    if result.entries and replicas > 0:
        last = result.entries[-1]
        end = last.physical_offset + last.size
        timeout = broker.settings.ha_ack_timeout_ms / 1000
        if not await ha.wait_replicated(end, replicas, timeout):
            status = (
                PutMessageStatus.FLUSH_SLAVE_TIMEOUT
                if ha.writable()
                else PutMessageStatus.SERVICE_NOT_AVAILABLE
            )
            return PutResult(status, result.entries)
    if not ha.writable():
        return PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, result.entries)
    return result


def failure_status(status: PutMessageStatus) -> pb.Status | None:
    """The v2 status for an HA put failure, None for other statuses."""
    if status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT:
        return pb.Status(
            code=pb.Code.SLAVE_PERSISTENCE_TIMEOUT, message="replicas did not confirm the message in time"
        )
    if status in (PutMessageStatus.SERVICE_NOT_AVAILABLE, PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH):
        return pb.Status(code=pb.Code.HA_NOT_AVAILABLE, message="this node stopped being a writable master")
    return None


def route_target(broker: Broker) -> tuple[str, int] | None:
    """(address, permission) to put in routes: the master (READ_WRITE) or, when the master is down,
    a live replica for reads (READ, RocketMQ's suggested-read); None when HA is off or nothing is known."""
    ha = broker.ha
    if ha is None:
        return None
    if ha.role == 1 and ha.writable():  # MASTER
        return ha.config.address, pb.Permission.READ_WRITE
    if ha.master.address and ha.master_alive:
        return ha.master.address, pb.Permission.READ_WRITE
    if ha.role == 2:  # REPLICA, master down: serve reads here
        return ha.config.address, pb.Permission.READ
    for replica in ha.replica_addresses:
        if replica.address:
            return replica.address, pb.Permission.READ
    return None


def ha_status(broker: Broker) -> dict[str, Any]:
    ha = broker.ha
    if ha is None:
        return {
            "group": broker.settings.broker_name,
            "node": broker.settings.listen,
            "address": broker.settings.advertise or broker.settings.listen,
            "role": "STANDALONE",
            "max_offset": broker.store.max_physical_offset,
            "writable": True,
            "min_in_sync_replicas": broker.settings.min_in_sync_replicas,
        }
    return {**ha.status(), "min_in_sync_replicas": broker.settings.min_in_sync_replicas}


#
# Metadata + consumer offsets shipped in META frames
#


def take_snapshot(metadata: MetadataStore, offsets: Any) -> dict[str, Any]:
    """Topics, groups and consumer offsets as JSON-ready values."""
    return {
        "topics": [dataclasses.asdict(t) for t in list(metadata.topics.values())],
        "groups": [dataclasses.asdict(g) for g in list(metadata.groups.values())],
        "offsets": [
            [group, topic, {str(q): o for q, o in queues.items()}]
            for (group, topic), queues in sorted(offsets.snapshot().items())
        ],
    }


def apply_snapshot(metadata: MetadataStore, offsets: Any, snapshot: dict[str, Any]) -> None:
    """Replace this node's topics, groups and consumer offsets with the master's (persisted)."""
    topics = {}
    for item in snapshot.get("topics", []):
        topic = TopicConfig(**{**item, "message_type": TopicType(item["message_type"])})
        topics[topic.name] = topic
    groups = {}
    for item in snapshot.get("groups", []):
        group = GroupConfig(**item)
        groups[group.name] = group
    table = {
        (str(g), str(t)): {int(q): int(o) for q, o in queues.items()}
        for g, t, queues in snapshot.get("offsets", [])
    }
    with metadata._lock:
        if metadata.topics != topics or metadata.groups != groups:
            metadata.topics = topics
            metadata.groups = groups
            metadata._save()
    if offsets.snapshot() != table:
        offsets.replace(table)
        offsets.persist()
