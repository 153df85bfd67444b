"""TransactionCheckService: the check-back loop (RocketMQ's TransactionalMessageCheckService).

An asyncio task on the broker's loop. Every tick it takes the half messages whose next check is due
(older than the immunity time, then backing off), and for each:

- out of checks (``max_checks``): rolled back with an op record, and logged;
- else the ``send_check`` callback offers it to a live producer of its topic (the broker wires a
  callback that pushes ``RecoverOrphanedTransactionCommand`` on that producer's Telemetry stream);
  sent or not, the check is counted durably and the next one scheduled with backoff.

The producer answers with EndTransaction (``source = SOURCE_SERVER_CHECK``), which resolves it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from dataplane.transaction.service import Pending, TransactionalMessageService

__all__ = ("CheckSender", "TransactionCheckService", "find_producer", "telemetry_sender")

logger = logging.getLogger(__name__)

# (half message as stored, its pending entry, transaction id) -> True when a producer got it
CheckSender = Callable[[Any, Pending, str], bool]


class TransactionCheckService:
    def __init__(
        self, service: TransactionalMessageService, send_check: CheckSender, tick_ms: int = 1000
    ) -> None:
        self.service = service
        self.send_check = send_check
        self.tick_ms = tick_ms
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run(), name="transaction-check")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_ms / 1000)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("transaction check round failed")

    async def check_once(self) -> int:
        """One round over the due half messages; returns how many were checked or rolled back."""
        service = self.service
        done = 0
        for pending in service.due():
            if service.pending.get(pending.offset) is not pending:
                continue  # resolved meanwhile
            if pending.checks >= service.max_checks:
                await service.expire(pending)
                done += 1
                continue
            try:
                half = service.half_message(pending)
            except Exception:
                logger.exception("half message at %d unreadable; rolled back", pending.offset)
                await service.expire(pending)
                continue
            try:
                sent = self.send_check(half, pending, half.msg_id)
            except Exception:
                logger.exception("transaction check of %s failed to send", pending.message_id)
                sent = False
            if not sent:
                logger.info(
                    "no live producer of %s for transaction check %s", pending.real_topic, pending.message_id
                )
            await service.record_check(pending)
            done += 1
        service.commit_progress()
        return done


def find_producer(clients: Any, topic: str, preferred: str = "", turn: int = 0) -> Any | None:
    """A client with an open Telemetry stream whose publishing settings name ``topic``.

    The producer that sent the message when it is still there, else one of the others in turn.
    """
    from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

    live = [
        s
        for s in clients.sessions()
        if s.outbound is not None
        and topic in s.topics
        and (
            s.client_type == pb.ClientType.PRODUCER
            or (s.settings is not None and s.settings.HasField("publishing"))
        )
    ]
    if not live:
        return None
    for session in live:
        if session.client_id == preferred:
            return session
    live.sort(key=lambda s: s.client_id)
    return live[turn % len(live)]


def telemetry_sender(broker: Any) -> CheckSender:
    """The broker's check callback: RecoverOrphanedTransactionCommand on a producer's Telemetry stream."""
    from dataplane.names import split
    from dataplane.services.consume import to_v2_message
    from dataplane.transaction.service import P_PRODUCER, P_REAL_QID, P_REAL_TOPIC, P_TRAN_MSG
    from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
    from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

    def send(half: Any, pending: Pending, transaction_id: str) -> bool:
        session = find_producer(broker.clients, pending.real_topic, pending.producer, pending.checks)
        if session is None or session.outbound is None:
            return False
        props = dict(half.properties)
        for key in (P_REAL_TOPIC, P_REAL_QID, P_TRAN_MSG, P_PRODUCER):
            props.pop(key, None)
        real = half._replace(
            topic=pending.real_topic, queue_id=int(half.properties.get(P_REAL_QID, "0")), properties=props
        )
        ns, name = split(pending.real_topic)
        message = to_v2_message(
            real,
            pb.Resource(resource_namespace=ns, name=name),
            store_host=broker.settings.advertise or broker.settings.listen,
        )
        command = svc.TelemetryCommand(
            recover_orphaned_transaction_command=svc.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=transaction_id
            )
        )
        session.outbound.put_nowait(command)
        return True

    return send
