"""TransactionalMessageService: half messages, op records and the pending set (RocketMQ's way).

- A TRANSACTION message is stored under :data:`HALF_TOPIC` queue 0 with its real topic/queue in
  ``REAL_TOPIC``/``REAL_QID`` (:func:`to_half_message`); consumers never see that topic.
  Its transaction id is the half record's offset message id (store host + commitlog offset).
- EndTransaction COMMIT re-puts the message to its real topic/queue (same ``UNIQ_KEY``) together
  with an op record in :data:`OP_TOPIC` (one append); ROLLBACK writes the op record only.
- Every check-back also writes an op record (kind ``CHECK`` with the count), so the check count
  survives a restart.
- The CommitLog is the state. On start the pending set is rebuilt by reading the half queue from
  the committed offset of :data:`CHECK_GROUP` and the op queue from its committed offset; both are
  moved forward as transactions resolve (the lowest offset still needed).

All methods run on one thread (the broker's event loop); the store calls are the only I/O.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dataplane.store.errors import StoreError
from dataplane.store.message import PROPERTY_UNIQ_KEY, MessageToStore
from dataplane.store.record import decode_message_id
from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = (
    "CHECK_GROUP",
    "HALF_TOPIC",
    "OP_TOPIC",
    "EndResult",
    "Pending",
    "TransactionError",
    "TransactionalMessageService",
    "to_half_message",
)

logger = logging.getLogger(__name__)

HALF_TOPIC = "rmq_sys_trans_half_topic"
OP_TOPIC = "rmq_sys_trans_op_half_topic"
CHECK_GROUP = "rmq_sys_trans_check_group"
P_REAL_TOPIC = "REAL_TOPIC"
P_REAL_QID = "REAL_QID"
P_TRAN_MSG = "TRAN_MSG"
P_PRODUCER = "__MQ_TX_CLIENT"
P_OP_KIND = "TRAN_OP"
P_OP_HALF = "TRAN_OP_HALF"
P_OP_CHECKS = "TRAN_OP_CHECKS"
COMMIT, ROLLBACK, CHECK = "COMMIT", "ROLLBACK", "CHECK"
_READ_BATCH = 1024
_RESOLVED_MAX = 100_000


class TransactionError(Exception):
    """Unknown, forged, foreign or already differently resolved transaction id."""


class EndResult:
    OK = "OK"
    ALREADY = "ALREADY"  # resolved before with the same resolution: idempotent OK


@dataclasses.dataclass(slots=True)
class Pending:
    """One unresolved half message."""

    offset: int  # commitlog offset of the half record (the transaction id encodes it)
    queue_offset: int  # its offset in the half queue
    real_topic: str
    message_id: str
    store_ms: int
    first_op: int  # lowest op-queue offset that may hold a record about it
    producer: str = ""
    checks: int = 0
    next_check_ms: int = 0


def to_half_message(msg: MessageToStore, client_id: str = "") -> MessageToStore:
    """``msg`` re-addressed to the half topic, its real topic/queue in properties."""
    props = dict(msg.properties)
    props[P_REAL_TOPIC] = msg.topic
    props[P_REAL_QID] = str(msg.queue_id)
    props[P_TRAN_MSG] = "true"
    if client_id:
        props[P_PRODUCER] = client_id
    return dataclasses.replace(msg, topic=HALF_TOPIC, queue_id=0, properties=props)


def _real_message(stored: Any) -> MessageToStore:
    props = dict(stored.properties)
    topic = props.pop(P_REAL_TOPIC)
    queue_id = int(props.pop(P_REAL_QID, "0"))
    props.pop(P_TRAN_MSG, None)
    props.pop(P_PRODUCER, None)
    return MessageToStore(
        topic,
        queue_id,
        stored.body,
        props,
        stored.flag,
        0,
        stored.born_timestamp,
        stored.born_host,
        stored.reconsume_times,
        stored.physical_offset,
    )


def _op(kind: str, pending: Pending, checks: int = 0) -> MessageToStore:
    props = {P_OP_KIND: kind, P_OP_HALF: str(pending.offset), PROPERTY_UNIQ_KEY: pending.message_id}
    if kind == CHECK:
        props[P_OP_CHECKS] = str(checks)
    return MessageToStore(OP_TOPIC, 0, kind.encode(), props)


class TransactionalMessageService:
    """The pending set over one CommitLog store (needs ``look_message_by_offset``).

    ``immunity_ms``: a half message is not checked before it is this old (RocketMQ's
    transactionTimeOut). Checks happen at ``check_interval_ms`` after that, doubling up to
    ``max_backoff_ms``; after ``max_checks`` unanswered checks the message is rolled back.
    """

    def __init__(
        self,
        store: Any,
        *,
        immunity_ms: int = 6_000,
        check_interval_ms: int = 60_000,
        max_backoff_ms: int = 600_000,
        max_checks: int = 15,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.immunity_ms = immunity_ms
        self.check_interval_ms = check_interval_ms
        self.max_backoff_ms = max_backoff_ms
        self.max_checks = max_checks
        self._clock = clock
        self.pending: dict[int, Pending] = {}
        # recently resolved: half offset -> (COMMIT/ROLLBACK, message id) (idempotent EndTransaction)
        self.resolved: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._op_max = 0  # op-queue offsets below this are written
        self._half_max = 0  # half-queue offsets below this are registered
        # SendMessage calls between storing half messages and registering them (on_prepared):
        # the half offset is not committed meanwhile, so a crash cannot skip an unregistered one.
        self.preparing = 0
        self.committed = self.rolled_back = self.checked = 0  # counters (tests, metrics)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    #
    # Recovery
    #

    def _read(self, topic: str, offset: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        while True:
            result = self.store.get_messages(topic, 0, offset, max_count=_READ_BATCH)
            if result.status is GetMessageStatus.OFFSET_TOO_SMALL:
                offset = result.next_begin_offset
                continue
            out.extend(result.messages)
            if not result.messages:
                return out, max(offset, result.next_begin_offset)
            offset = result.next_begin_offset

    def recover(self) -> None:
        """Rebuild the pending set from the half queue and the op queue (call before serving)."""
        offsets = self.store.consumer_offsets
        half_from = offsets.query(CHECK_GROUP, HALF_TOPIC, 0) or 0
        op_from = offsets.query(CHECK_GROUP, OP_TOPIC, 0) or 0
        halves, self._half_max = self._read(HALF_TOPIC, half_from)
        for msg in halves:
            self._add(msg.physical_offset, msg.queue_offset, msg.properties, msg.store_timestamp, op_from)
        ops, self._op_max = self._read(OP_TOPIC, op_from)
        for op in ops:
            props = op.properties
            try:
                half = int(props[P_OP_HALF])
                kind = props[P_OP_KIND]
            except (KeyError, ValueError):
                logger.warning("transaction op record at offset %d is malformed; skipped", op.queue_offset)
                continue
            pending = self.pending.get(half)
            if kind == CHECK:
                if pending is not None:
                    pending.checks = max(pending.checks, int(props.get(P_OP_CHECKS, "0")))
                    pending.next_check_ms = op.store_timestamp + self.backoff_ms(pending.checks)
            else:
                if pending is not None:
                    del self.pending[half]
                self._remember(half, kind, props.get(PROPERTY_UNIQ_KEY, ""))
        logger.info("transactions: %d pending after recovery", len(self.pending))

    def _add(
        self, offset: int, queue_offset: int, props: dict[str, str], store_ms: int, first_op: int
    ) -> None:
        try:
            real_topic = props[P_REAL_TOPIC]
        except KeyError:
            logger.warning("half message at %d has no REAL_TOPIC; skipped", offset)
            return
        self.pending[offset] = Pending(
            offset,
            queue_offset,
            real_topic,
            props.get(PROPERTY_UNIQ_KEY, ""),
            store_ms,
            first_op,
            props.get(P_PRODUCER, ""),
            0,
            store_ms + self.immunity_ms,
        )

    def _remember(self, offset: int, kind: str, message_id: str) -> None:
        self.resolved[offset] = (kind, message_id)
        if len(self.resolved) > _RESOLVED_MAX:
            self.resolved.popitem(last=False)

    #
    # Prepare / end
    #

    def on_prepared(self, msg: MessageToStore, entry: Any) -> str:
        """Register a half message that was just stored; returns its transaction id."""
        self._add(
            entry.physical_offset, entry.queue_offset, msg.properties, entry.store_timestamp, self._op_max
        )
        self._half_max = max(self._half_max, entry.queue_offset + 1)
        return str(entry.msg_id)

    def _lookup(self, topic: str, message_id: str, transaction_id: str, resolution: str) -> Pending | None:
        """The pending entry, None when already resolved the same way; TransactionError otherwise."""
        try:
            _, offset = decode_message_id(transaction_id)
        except (StoreError, ValueError, TypeError) as exc:
            raise TransactionError(f"malformed transaction id {transaction_id[:64]!r}") from exc
        pending = self.pending.get(offset)
        if pending is None:
            done, done_id = self.resolved.get(offset, ("", ""))
            if done and done_id == message_id:
                if done == resolution:
                    return None
                raise TransactionError(f"transaction {transaction_id} was already resolved with {done}")
            raise TransactionError(f"unknown transaction id {transaction_id}")
        if pending.real_topic != topic or pending.message_id != message_id:
            raise TransactionError(f"transaction {transaction_id} does not belong to this topic/message")
        return pending

    async def end(self, topic: str, message_id: str, transaction_id: str, commit: bool) -> str:
        """EndTransaction; EndResult.OK / ALREADY, or TransactionError / RuntimeError (store)."""
        kind = COMMIT if commit else ROLLBACK
        pending = self._lookup(topic, message_id, transaction_id, kind)
        if pending is None:
            return EndResult.ALREADY
        await self._resolve(pending, kind)
        return EndResult.OK

    async def _resolve(self, pending: Pending, kind: str) -> None:
        # Taken out of the pending set before the await: a concurrent end or check sees it resolved.
        del self.pending[pending.offset]
        self._remember(pending.offset, kind, pending.message_id)
        try:
            msgs = [_op(kind, pending)]
            if kind == COMMIT:
                msgs.insert(0, _real_message(self.store.look_message_by_offset(pending.offset)))
            result = await self.store.put_messages_async(msgs)
            if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
                raise RuntimeError(f"store refused the {kind} of {pending.message_id}: {result.status}")
        except BaseException:
            self.pending[pending.offset] = pending
            self.resolved.pop(pending.offset, None)
            raise
        self._op_max = max(self._op_max, result.entries[-1].queue_offset + 1)
        if kind == COMMIT:
            self.committed += 1
        else:
            self.rolled_back += 1

    #
    # Checks
    #

    def backoff_ms(self, checks: int) -> int:
        """Delay after the ``checks``-th check: the interval, doubling, at most ``max_backoff_ms``."""
        return int(min(self.check_interval_ms * 2 ** max(checks - 1, 0), self.max_backoff_ms))

    def due(self) -> list[Pending]:
        now = self._now_ms()
        return sorted((p for p in self.pending.values() if p.next_check_ms <= now), key=lambda p: p.offset)

    async def record_check(self, pending: Pending) -> None:
        """One check-back was sent (or no producer was there): count it durably, schedule the next."""
        if self.pending.get(pending.offset) is not pending:
            return
        checks = pending.checks + 1
        result = await self.store.put_messages_async([_op(CHECK, pending, checks)])
        if result.status in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            self._op_max = max(self._op_max, result.entries[-1].queue_offset + 1)
        pending.checks = checks
        pending.next_check_ms = self._now_ms() + self.backoff_ms(checks)
        self.checked += 1

    async def expire(self, pending: Pending) -> None:
        """Out of checks: roll back."""
        if self.pending.get(pending.offset) is not pending:
            return
        logger.warning(
            "transaction %s on %s unresolved after %d checks: rolled back",
            pending.message_id,
            pending.real_topic,
            pending.checks,
        )
        await self._resolve(pending, ROLLBACK)

    def half_message(self, pending: Pending) -> Any:
        return self.store.look_message_by_offset(pending.offset)

    def commit_progress(self) -> None:
        """Move the check group's offsets to the lowest half/op offsets still needed."""
        if self.preparing:
            return
        offsets = self.store.consumer_offsets
        if self.pending:
            half = min(p.queue_offset for p in self.pending.values())
            op = min(p.first_op for p in self.pending.values())
        else:
            half = self._half_max
            op = self._op_max
        if offsets.query(CHECK_GROUP, HALF_TOPIC, 0) != half:
            offsets.commit(CHECK_GROUP, HALF_TOPIC, 0, half)
        if offsets.query(CHECK_GROUP, OP_TOPIC, 0) != op:
            offsets.commit(CHECK_GROUP, OP_TOPIC, 0, op)
