"""The broker node: one store, the persisted metadata, POP state, clients, and long-poll wakeups."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from dataplane.auto_renew import AutoRenewals
from dataplane.clients import ClientRegistry
from dataplane.config import BrokerSettings
from dataplane.errors import GroupNotFound, TopicNotFound
from dataplane.ha_writes import build_ha
from dataplane.long_polling import EVERY, LongPolls, Parked
from dataplane.metadata import GroupConfig, MetadataStore, TopicConfig
from dataplane.names import BROADCAST_SEP, base_group, is_broadcast_member
from dataplane.pop import UNTIL, WAITING, PopState
from dataplane.receipt import ReceiptCodec, load_or_create_secret
from dataplane.receive_attempts import ReceiveAttempts
from dataplane.timer import RecallCodec, TimerMessageStore
from dataplane.trace import MessageTracer
from dataplane.transaction import TransactionalMessageService, TransactionCheckService, telemetry_sender

__all__ = ("Broker",)

logger = logging.getLogger(__name__)


def _open_store(settings: BrokerSettings, metadata: MetadataStore | None = None) -> Any:
    store_dir = settings.data_dir / "store"
    from dataplane.store import FlushDiskType as StoreFlush
    from dataplane.store import MessageStore, MessageStoreConfig  # type: ignore[attr-defined]

    config = MessageStoreConfig(
        store_dir=store_dir,
        mapped_file_size_commit_log=settings.commit_log_segment_bytes,
        flush_disk_type=StoreFlush.SYNC_FLUSH if settings.flush == "sync" else StoreFlush.ASYNC_FLUSH,
        max_message_size=max(settings.max_body_bytes + (64 << 10), 1 << 20),
        disk_full_ratio=settings.disk_full_ratio,
        disk_min_free_bytes=settings.disk_min_free_bytes,
    )
    if settings.tier_enabled and metadata is not None:  # tiered storage: docs/tiered-storage.md
        from dataplane.tier import open_tiered_store

        return open_tiered_store(settings, config, metadata)
    return MessageStore(config)


class Broker:
    """Owns the long-lived state; RPC handlers in ``dataplane.services`` call into it."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = MetadataStore(settings.data_dir)
        self.receipts = ReceiptCodec(
            load_or_create_secret(settings.data_dir), settings.receipt_handle_version
        )
        self.recalls = RecallCodec(load_or_create_secret(settings.data_dir))
        self.timers: TimerMessageStore | None = None
        self.transactions: TransactionalMessageService | None = None
        self._transaction_checks: TransactionCheckService | None = None
        self.clients = ClientRegistry()
        self.renewals = AutoRenewals()  # messages received with auto_renew (push consumers)
        self.attempts = ReceiveAttempts()  # what recent receives took, for their retries
        self.store: Any = _open_store(settings, self.metadata)
        self.tracer = MessageTracer(self.store, enabled=settings.trace_enabled)
        self.pop: PopState | None = None
        self.ha: Any = None  # dataplane.ha.HANode when a controller is configured (started by server.py)
        self.closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._polls = LongPolls()
        self._wakes_due: set[str] = set()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.store.start()
        self.store.add_dispatch_listener(self._on_dispatch)
        self.tracer.start(loop)
        if hasattr(self.store, "look_message_by_offset"):  # timers need the CommitLog store
            self.timers = TimerMessageStore(
                self.store, self.settings.data_dir / "timer", self.settings.max_delay_ms
            )
            self.timers.start()
            s = self.settings
            self.transactions = TransactionalMessageService(
                self.store,
                immunity_ms=s.transaction_timeout_ms,
                check_interval_ms=s.transaction_check_interval_ms,
                max_backoff_ms=s.transaction_check_max_backoff_ms,
                max_checks=s.max_transaction_checks,
            )
            self.transactions.recover()
            self._transaction_checks = TransactionCheckService(
                self.transactions, telemetry_sender(self), tick_ms=min(1000, s.transaction_check_interval_ms)
            )
            self._transaction_checks.start(loop)
        self.pop = PopState(
            self.settings.data_dir,
            initial_offset=self._initial_offset,
            on_commit=self.store.consumer_offsets.commit,
            sync=self.settings.flush == "sync",
            compact_after=self.settings.pop_journal_compact_records,
        )
        self.ha = build_ha(self)

    def _initial_offset(self, group: str, topic: str, queue_id: int) -> int:
        committed = self.committed_offset(group, topic, queue_id)
        if committed >= 0:
            return committed
        if is_broadcast_member(group):  # what was stored since the member first came (docs/broker.md)
            session = self.clients.get(group.partition(BROADCAST_SEP)[2])
            since = session.first_seen_ms if session is not None else int(time.time() * 1000)
            return int(self.store.get_offset_in_queue_by_time(topic, queue_id, since))
        # A new group starts from the first message still stored (documented in docs/broker.md).
        return int(self.store.get_min_offset_in_queue(topic, queue_id))

    def forget_group(self, name: str) -> int:
        """A deleted group: drop its POP positions (its broadcast members' too) and committed
        offsets, so it no longer shows in lag reports and a group made again with its name starts
        afresh. Returns how many positions went."""
        dropped = 0
        if self.pop is not None:
            dropped = self.pop.forget(k for k in self.pop.position_keys() if base_group(k[0]) == name)
        offsets = self.store.consumer_offsets
        for group in {g for g, _ in offsets.snapshot() if base_group(g) == name}:
            offsets.remove_group(group)
        return dropped

    def forget_topic(self, name: str) -> int:
        """A deleted topic: drop every group's POP positions and committed offsets on it."""
        dropped = 0
        if self.pop is not None:
            dropped = self.pop.forget(k for k in self.pop.position_keys() if k[1] == name)
        self.store.consumer_offsets.remove_topic(name)
        return dropped

    def expire_broadcast_members(self) -> int:
        """Drop the positions and offsets of broadcast members (``group@client``) that have not
        received from a topic for ``broadcast_member_idle_hours``: every restart of a broadcast
        consumer comes as a new client, and the old one's position would stay, lagging more and
        more in the lag reports. A replica leaves it to its master (the change is replicated)."""
        if self.pop is None or not getattr(self.store, "writable", True):
            return 0
        idle = self.pop.idle(is_broadcast_member, self.settings.broadcast_member_idle_hours * 3600)
        if not idle:
            return 0
        gone = set(idle)
        dropped = self.pop.forget(k for k in self.pop.position_keys() if (k[0], k[1]) in gone)
        for group, topic in idle:
            self.store.consumer_offsets.remove(group, topic)
        logger.info("dropped %d positions of %d idle broadcast members", dropped, len(idle))
        return dropped

    def renew_auto(self, now_ms: int | None = None, gone: str = "") -> tuple[int, int]:
        """Keep messages received with auto_renew invisible while their client is connected
        (dataplane/auto_renew.py); returns (renewed, released: their client has gone; ``gone``
        names one known to have). A replica leaves it to its master (the changes are replicated)."""
        pop = self.pop
        if pop is None or not self.renewals or not getattr(self.store, "writable", True):
            return 0, 0
        s = self.settings
        now = int(time.time() * 1000) if now_ms is None else now_ms
        renewed = released = 0
        woken: set[str] = set()  # topics with released messages: parked receives look again
        with pop.batch():  # one journal write for the lot
            for key, renewal in self.renewals.due(now):
                group, topic, queue_id, offset = key
                entry = pop.lookup(group, topic, queue_id, offset, renewal.nonce)
                if entry is None or entry[WAITING]:  # acked, nacked or redelivered meanwhile
                    continue
                if renewal.client_id == gone or not self.clients.alive(renewal.client_id):
                    until = now + s.auto_renew_released_ms
                    if until >= entry[UNTIL]:  # it comes back sooner anyway
                        continue
                    released += 1
                    woken.add(topic)
                elif now - renewal.received_ms < s.auto_renew_max_ms:
                    until = now + s.auto_renew_slice_ms
                    renewal.check_ms = until - s.auto_renew_ahead_ms
                    self.renewals.add(key, renewal)
                    renewed += 1
                else:  # renewed long enough: it comes back when this invisible time runs out
                    continue
                pop.extend(group, topic, queue_id, entry, until)
        for topic in woken:  # they wait until the new, nearer, invisible time, not their deadline
            self.wake_all(topic)
        if released:
            logger.info("released %d auto-renewed messages of clients that have gone", released)
        return renewed, released

    def release_renewals(self, client_id: str) -> int:
        """A client left (NotifyClientTermination, or it went silent): the messages kept invisible
        for it come back to their groups after ``auto_renew_released_ms``, not when their renewed
        time runs out."""
        if not client_id or not self.renewals:
            return 0
        now = int(time.time() * 1000)
        if not self.renewals.expedite(client_id, now):
            return 0
        return self.renew_auto(now, gone=client_id)[1]

    def release_renewals_later(self, client_id: str) -> None:
        """A client's Telemetry stream ended: if it makes no call within ``auto_renew_gone_after_s``
        (a reconnecting client opens a new stream at once), it crashed or was cut off, and its
        renewed messages are released as if it had said goodbye."""
        loop = self._loop
        if not client_id or loop is None or loop.is_closed():
            return
        ended_ms = int(time.time() * 1000)

        def check() -> None:
            if not self.closing and self.clients.silent_since(client_id, ended_ms):
                released = self.release_renewals(client_id)
                if released:
                    logger.info("client %s went silent: %d of its messages released", client_id, released)

        loop.call_later(self.settings.auto_renew_gone_after_s, check)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The store's committed offset of a group on a queue, -1 when there is none."""
        value = self.store.consumer_offsets.query(group, topic, queue_id)
        return -1 if value is None or value < 0 else int(value)

    def begin_shutdown(self) -> None:
        """Stop long polls and Telemetry streams so the gRPC grace period is not spent waiting."""
        self.closing = True
        self.tracer.stop()
        if self._transaction_checks is not None:
            self._transaction_checks.stop()
        for topic in self._polls.topics():
            self._polls.wake_all(topic)
        self.clients.close_streams()

    def close(self) -> None:
        if self.pop is not None:
            self.pop.close()
        try:
            if self._transaction_checks is not None:
                self._transaction_checks.stop()
            if self.transactions is not None:
                self.transactions.commit_progress()
            if self.timers is not None:
                self.timers.shutdown()
            self.tracer.flush()
            self.store.consumer_offsets.persist()
        finally:
            self.store.shutdown()

    # Long polling

    def _on_dispatch(self, topic: str, queue_id: int, new_max_offset: int) -> None:
        # Runs on the thread that appended: the loop thread for SendMessage (the wake goes out at the
        # loop's next pass, no self-pipe write), a store/replication thread otherwise. Nobody waiting:
        # nothing to do; a waiter registered after this check polls the store itself afterwards.
        if topic not in self._polls:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._defer_wake(topic)
            return
        try:
            loop.call_soon_threadsafe(self._defer_wake, topic)
        except RuntimeError:
            pass  # loop closed between the check and the call (shutdown)

    def _defer_wake(self, topic: str) -> None:
        # One wake per topic per loop pass: a batch dispatches each of its queues separately, and
        # one woken receive looks at every queue (and hands the wake on when it leaves messages).
        if not self._wakes_due:
            assert self._loop is not None
            self._loop.call_soon(self._wake_due)
        self._wakes_due.add(topic)

    def _wake_due(self) -> None:
        topics, self._wakes_due = self._wakes_due, set()
        for topic in topics:
            self._polls.wake(topic)

    def wake(self, topic: str) -> None:
        """New messages on ``topic`` (or one became receivable): one parked receive per group looks."""
        self._polls.wake(topic)

    def wake_all(self, topic: str) -> None:
        """Every parked receive and pull of ``topic`` looks again (its positions were reset)."""
        self._polls.wake_all(topic)

    def waiter(self, topic: str, group: str = EVERY) -> Parked:
        """Park a long poll on ``topic`` for ``group`` (dataplane.long_polling); await its future."""
        assert self._loop is not None
        return self._polls.park(self._loop, topic, group)

    def pass_wake(self, parked: Parked, wake: int) -> None:
        """Hand on a wake that reached ``parked`` to the next member of its group parked before it."""
        self._polls.pass_on(parked.topic, parked.key, wake)

    def drop_waiter(self, parked: Parked) -> None:
        self._polls.drop(parked)

    # Configuration lookups

    def topic(self, qualified: str) -> TopicConfig:
        topic = self.metadata.get_topic(qualified)
        if topic is None:
            raise TopicNotFound(f"topic {qualified!r} not found")
        return topic

    def group(self, qualified: str) -> GroupConfig:
        group = self.metadata.get_group(qualified)
        if group is None:
            if not self.settings.auto_create_groups:
                raise GroupNotFound(f"consumer group {qualified!r} not found")
            group = self.metadata.create_group(GroupConfig(name=qualified))
        return group

    def max_attempts(self, group: GroupConfig) -> int:
        return group.max_delivery_attempts or self.settings.max_delivery_attempts
