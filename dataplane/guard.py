"""Security, quotas, metering and tenant metrics of one broker node, and their background loops.

``dataplane.interceptors`` calls :meth:`Guard.admit` before every v2 RPC and the ``count_*``
methods after it; nothing here calls the control plane: keys, ACLs and quotas come from the
persisted ``SecurityStore`` the control plane pushes to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from dataplane.auth import Authenticator, Principal, Unauthorized
from dataplane.auth.resources import Touch
from dataplane.broker import Broker
from dataplane.buffered_stream import Encoded
from dataplane.clients import CLIENT_ID_HEADER, header
from dataplane.errors import Forbidden
from dataplane.metering import (
    JOURNAL_SYNC_S,
    OUTBOX_DIR,
    LagSample,
    MeteringShipper,
    UsageMeter,
    metering_store_settings,
)
from dataplane.names import namespace_from_metadata, qualify
from dataplane.quota import QueueShares, QuotaEnforcer, StorageQuotaExceeded, TooManyRequests
from dataplane.storage_usage import StorageUsage, tenant_topic
from dataplane.store.errors import StoreError
from dataplane.store.tiered.object_store import open_object_store
from dataplane.tenant_metrics import TenantMetrics
from mqcloud.admin_client import BrokerAdminClient
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = ("Admission", "Guard")

logger = logging.getLogger(__name__)

# how often silent client ids are forgotten (they stop counting towards the gauge at once; this
# only bounds the memory they hold)
CONNECTION_EXPIRE_S = 60.0


def _queue_shares(broker: Broker) -> QueueShares:
    """Queue shares from this node's topics and the peers' (their admin API, operator token)."""
    s = broker.settings
    token = s.admin_token.get_secret_value() if s.admin_token else None
    tls = (
        s.tls_cert_file is not None
    )  # peers serve TLS as this node does; roots: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH

    def local() -> dict[str, int]:
        return {name: t.queue_count for name, t in list(broker.metadata.topics.items())}

    def fetch(peer: str) -> dict[str, int]:
        with BrokerAdminClient(peer, token=token, tls=tls, timeout=min(s.quota_rebalance_s, 5.0)) as admin:
            return {t.name: t.queue_count for t in admin.list_topics()}

    return QueueShares(local, s.quota_peers, fetch)


class Admission:
    """What :meth:`Guard.admit` learnt about a call."""

    __slots__ = ("header_ns", "principal", "tenant")

    def __init__(self, principal: Principal | None, tenant: str, header_ns: str) -> None:
        self.principal = principal
        self.tenant = tenant
        self.header_ns = header_ns


class Guard:
    def __init__(self, broker: Broker) -> None:
        s = broker.settings
        self.broker = broker
        self.settings = s
        security = broker.metadata.security
        self.auth = Authenticator(security, dev_mode=s.dev_mode)
        self.storage = StorageUsage(broker.store)
        self.shares = _queue_shares(broker) if s.quota_peers else None
        self.quotas = QuotaEnforcer(
            security,
            nodes=s.quota_nodes,
            burst_s=s.quota_burst_s,
            storage_bytes=self.storage.tenant_bytes,
            shares=self.shares,
        )
        outbox = s.data_dir / OUTBOX_DIR
        node = (s.ha_node or s.listen) if s.controller else ""
        self.meter = UsageMeter(outbox, s.broker_name, s.data_dir, node=node)
        store = metering_store_settings(
            s.metering_dir,
            s.data_dir,
            endpoint=s.tier_endpoint,
            region=s.tier_region,
            access_key_id=s.tier_access_key_id,
            secret_access_key=s.tier_secret_access_key.get_secret_value(),
            timeout_s=min(s.tier_request_timeout_s, 10.0),  # files of a few KiB; shutdown waits on it
        )
        self.shipper = MeteringShipper(outbox, open_object_store(store))
        self.metrics = TenantMetrics()
        self._lag: dict[tuple[str, str, str], tuple[int, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._writing: asyncio.Lock | None = None
        self._sync_policy = s.flush == "sync"
        self._journal_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._journal_syncing = False
        self._group_task: asyncio.Task[None] | None = None
        self._shipping: asyncio.Lock | None = None

    # Admission (loop thread, every v2 call)

    def admit(
        self,
        rpc: str,
        touches: Iterable[Touch],
        metadata: Any,
        peer: str,
        produce: dict[tuple[str, str], tuple[int, int, int]] | None = None,
    ) -> Admission:
        """Authenticate, authorize and apply connection/produce quotas; raises the BrokerError to answer."""
        header_ns = namespace_from_metadata(metadata)
        try:
            principal = self.auth.authenticate(metadata)
            tenant = self.auth.authorize(principal, touches, header_ns, peer)
        except (Unauthorized, Forbidden) as exc:
            self.metrics.refused(exc.code)
            logger.info("%s refused: %s", rpc, exc.message, extra={"peer": peer})
            raise
        try:
            if tenant:
                client_id = header(metadata, CLIENT_ID_HEADER)
                if rpc == "NotifyClientTermination":
                    self.quotas.connections.forget(tenant, client_id)
                else:
                    limit = self.quotas.limit(tenant, "max_connections")
                    self.quotas.connections.admit(tenant, client_id, limit)
            if produce:
                self.quotas.admit_produce(tenant, produce)
        except StorageQuotaExceeded:
            self.metrics.throttled(tenant, "storage")
            raise
        except TooManyRequests:
            self.metrics.throttled(tenant, "produce" if produce else "connections")
            raise
        self.meter.count_call(tenant, rpc)
        return Admission(principal, tenant, header_ns)

    def admit_consume(self, admission: Admission, group: pb.Resource, topic: pb.Resource, wanted: int) -> int:
        ns = admission.tenant
        if not ns:
            return wanted
        group_q = qualify(group.resource_namespace or admission.header_ns, group.name)
        topic_q = qualify(topic.resource_namespace or admission.header_ns, topic.name)
        try:
            return self.quotas.admit_consume(ns, topic_q, group_q, wanted)
        except TooManyRequests:
            self.metrics.throttled(ns, "consume")
            raise

    # Accounting (after the handler)

    def count_sent(self, per_topic: dict[tuple[str, str], list[int]], seconds: float) -> None:
        """``per_topic``: (namespace, tenant-relative topic) -> body sizes of the stored messages."""
        for (ns, topic), sizes in per_topic.items():
            if not sizes:
                continue
            total = sum(sizes)
            self.storage.added(ns, total)
            if ns:  # tenant-labelled figures are a tenant's, as on the delivery side (count_delivered)
                self.meter.count_in(ns, sizes)
                self.metrics.messages_in(ns, topic, len(sizes), total)
        for ns in {ns for ns, _ in per_topic if ns}:
            self.metrics.send_latency(ns, seconds)

    def count_delivering(self, admission: Admission, topic: pb.Resource, responses: list[Any]) -> list[int]:
        """Meter messages before they are handed to the client (journaled: survives a SIGKILL);
        returns their body sizes. ``responses`` are message responses, protobuf or ``Encoded``."""
        sizes = [r.body_size if type(r) is Encoded else len(r.message.body) for r in responses]
        ns = topic.resource_namespace or admission.header_ns
        if ns:
            self.meter.count_out(ns, sizes)
        return sizes

    def count_delivered(
        self, admission: Admission, group: pb.Resource, topic: pb.Resource, sizes: list[int], seconds: float
    ) -> None:
        ns = topic.resource_namespace or admission.header_ns
        if not ns or not sizes:
            return
        total = sum(sizes)
        self.metrics.messages_out(ns, topic.name, group.name, len(sizes), total)
        self.metrics.receive_latency(ns, seconds)
        group_q = qualify(group.resource_namespace or admission.header_ns, group.name)
        self.quotas.debit_consume(ns, qualify(ns, topic.name), group_q, len(sizes), total)

    # Background loops

    def start(self) -> None:
        self._writing = asyncio.Lock()
        self._shipping = asyncio.Lock()
        self.storage.rescan()
        self._sample_storage()
        s = self.settings
        for interval, job in (
            (s.storage_scan_s, self.storage.rescan),
            (s.storage_sample_s, self._sample_storage),
            (s.lag_sample_s, self._sample_lag),
            (CONNECTION_EXPIRE_S, self.quotas.connections.expire),
            (s.broadcast_expire_check_s, self.broker.expire_broadcast_members),
            (s.auto_renew_period_s, self.broker.renew_auto),
        ):
            self._tasks.append(asyncio.create_task(self._every(interval, job)))
        self._tasks.append(asyncio.create_task(self._every_async(s.metering_flush_s, self.flush)))
        self._tasks.append(asyncio.create_task(self._every_async(JOURNAL_SYNC_S, self._sync_journal)))
        if self.shares is not None:
            self._tasks.append(asyncio.create_task(self._rebalance_quotas(s.quota_rebalance_s)))
        if self.shipper.pending():  # files a previous run closed but did not upload
            self._tasks.append(asyncio.create_task(self._ship()))
        self.metrics.add_gauges(self._gauges)

    async def stop(self) -> None:
        """Stop the loops and write what was counted (after the gRPC server stopped)."""
        self.metrics.remove_gauges(self._gauges)
        assert self._writing is not None
        async with self._writing:  # never cancel a flush between its checkpoint and its files
            for task in self._tasks:
                task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        # with the store failing already, shutdown does not wait for it: the next start ships
        await self.flush(
            ship=not self.shipper.failing, ship_deadline=time.monotonic() + self.settings.grace_seconds
        )
        await asyncio.to_thread(self.meter.close)

    async def flush(self, ship: bool = True, ship_deadline: float | None = None) -> None:
        """Close the changed minutes and the samples into outbox files, then ship the outbox."""
        assert self._writing is not None
        async with self._writing:
            records, state = self.meter.snapshot()
            try:
                await asyncio.to_thread(self.meter.write, records, state)
            except OSError:
                logger.exception("metering flush failed; the records are kept for the next one")
                self.meter.requeue(records)
        if ship:
            await self._ship(ship_deadline)

    async def _ship(self, deadline: float | None = None) -> None:
        assert self._shipping is not None
        async with self._shipping:
            try:
                await asyncio.to_thread(self.shipper.ship, deadline)
            except (OSError, StoreError) as exc:
                left = len(self.shipper.pending())
                logger.warning("metering upload failed (%s); %d files kept locally and retried", exc, left)

    async def _rebalance_quotas(self, interval: float) -> None:
        assert self.shares is not None
        while True:
            try:
                await asyncio.to_thread(self.shares.refresh)
            except Exception:
                logger.exception("quota shares: refresh failed")
            await asyncio.sleep(interval)

    def metering_durable(self) -> asyncio.Future[None] | None:
        """Under SYNC_FLUSH, while journal entries appended so far are not fsynced: a future done
        once they are, as the CommitLog's group commit does for the message (one fsync covers every
        call waiting); None when there is nothing to wait for (no coroutine for the usual case)."""
        journal = self.meter.journal
        if not self._sync_policy or journal.synced >= journal.total:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._journal_waiters.append((journal.total, waiter))
        if not self._journal_syncing:
            self._journal_syncing = True
            self._group_task = asyncio.create_task(self._group_sync())
        return waiter

    async def _group_sync(self) -> None:
        journal = self.meter.journal
        try:
            while self._journal_waiters:
                try:
                    await asyncio.to_thread(journal.sync)
                except OSError:
                    logger.exception("metering journal fsync failed")
                    journal.synced = journal.total  # the calls go on; the error is logged
                waiting, self._journal_waiters = self._journal_waiters, []
                for target, waiter in waiting:
                    if target > journal.synced:
                        self._journal_waiters.append((target, waiter))  # appended during that fsync
                    elif not waiter.done():
                        waiter.set_result(None)
        finally:
            self._journal_syncing = False

    async def _sync_journal(self) -> None:
        if self.meter.journal.dirty:
            await asyncio.to_thread(self.meter.sync)

    async def _every(self, interval: float, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                job()
            except Exception:
                logger.exception("periodic job %s failed", getattr(job, "__name__", job))

    async def _every_async(self, interval: float, job: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception:
                logger.exception("periodic job failed")

    def _sample_storage(self) -> None:
        if not getattr(self.broker.store, "writable", True):
            return  # an HA replica holds copies of the master's bytes: only the master bills storage
        self.meter.add_storage((ns, topic, size) for (ns, topic), size in self.storage.topic_bytes().items())

    def lag_samples(self) -> list[LagSample]:
        broker = self.broker
        pop = broker.pop
        if pop is None:
            return []
        store = broker.store
        now = int(time.time() * 1000)
        out = []
        for (group, topic, qid), pos in list(pop.items()):
            tenant, qualified, _ = group.partition("%")
            if not qualified or not tenant or topic.startswith("%") or tenant_topic(topic) is None:
                continue  # system groups and retry/DLQ topics are not sampled
            high = int(store.get_max_offset_in_queue(topic, qid))
            committed = pos.committed()
            lag = max(high - committed, 0)
            lag_ms = 0
            if lag:
                result = store.get_messages(topic, qid, committed, max_count=1)
                if result.messages:
                    lag_ms = max(now - result.messages[0].store_timestamp, 0)
            out.append(LagSample(tenant, group, topic, qid, lag, lag_ms, len(pos.in_flight), committed, high))
        return out

    def _sample_lag(self) -> None:
        samples = self.lag_samples()
        self.meter.add_lag(samples)
        lag: dict[tuple[str, str, str], tuple[int, int]] = {}
        for s in samples:
            key = (s.tenant, s.group.partition("%")[2], s.topic.partition("%")[2])
            msgs, ms = lag.get(key, (0, 0))
            lag[key] = (msgs + s.lag_messages, max(ms, s.lag_ms))
        self._lag = lag

    def security_namespaces(self) -> set[str]:
        """Namespaces with a tenant-wide quota."""
        return {ns for ns, topic, group in list(self.quotas.security.quotas) if not topic and not group}

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "mq_tenant_consumer_lag_messages", "Consumer lag", labels=["tenant", "group", "topic"]
        )
        lag_ms = GaugeMetricFamily(
            "mq_tenant_consumer_lag_ms",
            "Age of the oldest unconsumed message",
            labels=["tenant", "group", "topic"],
        )
        for key, (msgs, ms) in self._lag.items():
            lag.add_metric(list(key), msgs)
            lag_ms.add_metric(list(key), ms)
        yield lag
        yield lag_ms
        clients = GaugeMetricFamily(
            "mq_tenant_connected_clients", "Clients seen in the last 2 min", labels=["tenant"]
        )
        for ns, count in self.quotas.connections.counts().items():
            clients.add_metric([ns], count)
        yield clients
        journal = self.meter.journal
        yield GaugeMetricFamily(
            "mq_metering_outbox_files",
            "Closed metering files not yet in the object store",
            value=len(self.shipper.pending()),
        )
        yield GaugeMetricFamily(
            "mq_metering_upload_failures", "Failed metering uploads (retried)", value=self.shipper.failures
        )
        yield GaugeMetricFamily(
            "mq_metering_journal_entries",
            "Metering journal entries appended since start",
            value=journal.total,
        )
        yield GaugeMetricFamily(
            "mq_metering_journal_synced_entries",
            "Metering journal entries an fsync has covered",
            value=journal.synced,
        )
        yield GaugeMetricFamily(
            "mq_metering_journal_write_errors",
            "Metering journal appends that failed (counts kept in memory only until the next flush)",
            value=journal.write_errors,
        )
        if self.shares is not None:
            share = GaugeMetricFamily(
                "mq_tenant_quota_share",
                "Part of the tenant's rate limits this node enforces",
                labels=["tenant"],
            )
            for ns in sorted(self.security_namespaces()):
                share.add_metric([ns], self.quotas.share(ns))
            yield share
        storage = GaugeMetricFamily("mq_tenant_storage_bytes", "Bytes held in the store", labels=["tenant"])
        for ns, size in self.storage.tenant_totals().items():
            if ns:  # topics outside any namespace (system topics, development brokers) are no tenant's
                storage.add_metric([ns], size)
        yield storage
        store = self.broker.store
        yield GaugeMetricFamily(
            "mq_broker_store_disk_usage_ratio", "Disk usage of the store", value=store.disk_usage_ratio()
        )
        yield GaugeMetricFamily(
            "mq_broker_store_max_physical_offset",
            "CommitLog end offset",
            value=getattr(store, "max_physical_offset", 0),
        )
        yield GaugeMetricFamily(
            "mq_broker_store_running",
            "1 while the store accepts writes",
            value=1 if not self.broker.closing else 0,
        )
