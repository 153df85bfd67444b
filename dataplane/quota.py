"""Quotas on the data path: token buckets for produce and consume rates, storage, message size and
connections, all read from the limits the control plane pushed (``SecurityStore``).

Rates are cluster-wide limits. A broker enforces its share of them: with ``quota_peers`` (the other
nodes serving the cluster) the share of the tenant's queues it holds (a topic's own limit: its share
of that topic's queues), re-read from the peers every ``quota_rebalance_s``; without peers, or until
every peer has answered once, ``1 / quota_nodes``. Clients spread their traffic over a topic's queues,
so a node holding three of a tenant's four queues sees three quarters of its traffic. A request that
does not fit answers TOO_MANY_REQUESTS at once: nothing waits, so a tenant at its limit costs the
broker one refused call, not a queue.

Buckets hold at most ``burst_s`` seconds of their rate. Produce takes messages and bytes before the
write (all buckets or none); consume is admitted while the buckets are not in debt, the receive batch
is capped to the messages left, and what was delivered is debited afterwards (a debt delays the
next receive).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from dataplane.errors import BodyTooLarge, BrokerError, Forbidden
from dataplane.security_store import SecurityStore
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = (
    "ConnectionTracker",
    "QueueShares",
    "QuotaEnforcer",
    "StorageQuotaExceeded",
    "TokenBucket",
    "TooManyRequests",
)

logger = logging.getLogger(__name__)


class TooManyRequests(BrokerError):
    code = pb.Code.TOO_MANY_REQUESTS


class StorageQuotaExceeded(Forbidden):
    """Produce refused because the tenant's storage quota is full (FORBIDDEN: retrying soon won't help)."""


class TokenBucket:
    """``rate`` tokens per second, at most ``capacity`` stored; may go into debt through ``debit``."""

    __slots__ = ("capacity", "rate", "tokens", "updated")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = now

    def refill(self, now: float) -> float:
        elapsed = now - self.updated
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
            self.updated = now
        return self.tokens

    def fits(self, amount: float, now: float) -> bool:
        """Whether ``amount`` can be taken now. A full bucket admits one oversized request (debt)."""
        tokens = self.refill(now)
        return amount <= tokens or (tokens >= self.capacity and self.rate > 0)

    def debit(self, amount: float) -> None:
        self.tokens -= amount

    def reconfigure(self, rate: float, capacity: float) -> None:
        if rate != self.rate or capacity != self.capacity:
            self.rate = rate
            self.capacity = capacity
            self.tokens = min(self.tokens, capacity)


@dataclasses.dataclass(slots=True)
class _Client:
    last_seen: float


class ConnectionTracker:
    """Distinct client ids per namespace, for ``max_connections``; silent clients expire."""

    def __init__(self, expire_s: float = 120.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.expire_s = expire_s
        self._clock = clock
        self._clients: dict[str, dict[str, _Client]] = {}

    def admit(self, namespace: str, client_id: str, limit: int | None) -> None:
        if not client_id:
            return
        now = self._clock()
        clients = self._clients.setdefault(namespace, {})
        known = clients.get(client_id)
        if known is not None:
            known.last_seen = now
            return
        if limit is not None and len(clients) >= limit:
            self._expire(clients, now)
            if len(clients) >= limit:
                raise TooManyRequests(
                    f"namespace {namespace!r} already has {len(clients)} connected clients "
                    f"(max_connections {limit})"
                )
        clients[client_id] = _Client(now)

    def forget(self, namespace: str, client_id: str) -> None:
        self._clients.get(namespace, {}).pop(client_id, None)

    def _expire(self, clients: dict[str, _Client], now: float) -> None:
        for cid in [c for c, v in clients.items() if now - v.last_seen > self.expire_s]:
            del clients[cid]

    def expire(self) -> None:
        """Forget clients silent for ``expire_s`` (on the event loop, periodically: ids that never
        come back would otherwise pile up when no ``max_connections`` limit makes ``admit`` prune)."""
        now = self._clock()
        for ns in list(self._clients):
            clients = self._clients[ns]
            self._expire(clients, now)
            if not clients:
                del self._clients[ns]

    def counts(self) -> dict[str, int]:
        """Clients seen within ``expire_s``, per namespace.

        Read by the metrics endpoint's thread while the event loop admits clients: it changes
        nothing and walks copies (``list()`` of a dict is taken in one step under the GIL), where
        iterating or expiring the live dicts could raise "dictionary changed size during iteration".
        """
        now = self._clock()
        live: dict[str, int] = {}
        for ns, clients in list(self._clients.items()):
            count = sum(1 for c in list(clients.values()) if now - c.last_seen <= self.expire_s)
            if count:
                live[ns] = count
        return live


class QueueShares:
    """This node's share of each tenant's and each topic's queues over the nodes serving the cluster.

    ``local`` gives this node's queue count per qualified topic (``ns%topic``); ``fetch(peer)`` a peer's
    (its admin API). ``refresh`` (blocking: run it off the event loop) asks every peer, keeps the
    last answer of one that fails, and recomputes; until every peer has answered once, every share is
    the even split ``1 / (1 + len(peers))``.
    """

    def __init__(
        self,
        local: Callable[[], Mapping[str, int]],
        peers: Sequence[str],
        fetch: Callable[[str], Mapping[str, int]],
    ) -> None:
        self.peers = list(peers)
        self.even = 1.0 / (1 + len(self.peers))
        self._local = local
        self._fetch = fetch
        self._known: dict[str, dict[str, int]] = {}
        self.tenants: dict[str, float] = {}  # replaced whole by recompute (readers see one version)
        self.topics: dict[str, float] = {}

    def of(self, namespace: str, topic: str = "") -> float:
        if topic:
            share = self.topics.get(topic)
            if share is not None:
                return share
        return self.tenants.get(namespace, self.even)

    def refresh(self) -> None:
        for peer in self.peers:
            try:
                self._known[peer] = dict(self._fetch(peer))
            except Exception as exc:  # noqa: BLE001 - a peer down keeps its last counts
                logger.warning("quota shares: peer %s did not answer (%s); using its last counts", peer, exc)
        self.recompute()

    def recompute(self) -> None:
        if len(self._known) < len(self.peers):
            self.tenants, self.topics = {}, {}
            return
        mine = dict(self._local())
        topic_total: dict[str, int] = {}
        for counts in (mine, *self._known.values()):
            for topic, queues in counts.items():
                topic_total[topic] = topic_total.get(topic, 0) + max(queues, 0)
        tenant_mine: dict[str, int] = {}
        tenant_total: dict[str, int] = {}
        for topic, total in topic_total.items():
            ns, sep, _ = topic.partition("%")
            if not sep:
                continue  # system topics: no tenant
            tenant_total[ns] = tenant_total.get(ns, 0) + total
            tenant_mine[ns] = tenant_mine.get(ns, 0) + mine.get(topic, 0)
        self.topics = {t: mine.get(t, 0) / total for t, total in topic_total.items() if total > 0}
        self.tenants = {ns: tenant_mine[ns] / total for ns, total in tenant_total.items() if total > 0}


class QuotaEnforcer:
    """Token buckets keyed by (scope, limit name), built lazily from the pushed limits."""

    def __init__(
        self,
        security: SecurityStore,
        *,
        nodes: int = 1,
        burst_s: float = 1.0,
        storage_bytes: Callable[[str], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        shares: QueueShares | None = None,
    ) -> None:
        self.security = security
        self.nodes = max(nodes, 1)
        self.shares = shares
        self.burst_s = burst_s
        self._storage_bytes = storage_bytes
        self._clock = clock
        self._buckets: dict[tuple[str, str, str, str], TokenBucket] = {}
        self.connections = ConnectionTracker()

    def share(self, namespace: str, topic: str = "") -> float:
        """The part of a cluster-wide limit this node enforces (of a topic's own limit with ``topic``)."""
        if self.shares is None:
            return 1.0 / self.nodes
        return self.shares.of(namespace, topic)

    def _bucket(self, scope: tuple[str, str, str], limit_name: str, limit: int, now: float) -> TokenBucket:
        rate = limit * self.share(scope[0], scope[1])
        capacity = max(rate * self.burst_s, 1.0)
        key = (*scope, limit_name)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(rate, capacity, now)
        else:
            bucket.reconfigure(rate, capacity)
        return bucket

    def _scoped_limits(
        self, namespace: str, topic: str = "", group: str = ""
    ) -> Iterable[tuple[tuple[str, str, str], Mapping[str, int]]]:
        quotas = self.security.quotas
        base = quotas.get((namespace, "", ""))
        if base is not None:
            yield (namespace, "", ""), base.limits
        if topic:
            narrow = quotas.get((namespace, topic, ""))
            if narrow is not None:
                yield (namespace, topic, ""), narrow.limits
        if group:
            narrow = quotas.get((namespace, "", group))
            if narrow is not None:
                yield (namespace, "", group), narrow.limits

    def limit(self, namespace: str, name: str) -> int | None:
        quota = self.security.quotas.get((namespace, "", ""))
        return None if quota is None else quota.limits.get(name)

    # Produce

    def admit_produce(self, namespace: str, produce: Mapping[tuple[str, str], tuple[int, int, int]]) -> None:
        """Take (messages, bytes) for every topic of a request, or refuse it whole.

        ``produce``: (namespace as named, qualified topic) -> (messages, body bytes, largest body), as
        the interceptor reads it off the request. A call with no namespace has no quota to take from.
        """
        if not namespace:
            return
        quotas = self.security.quotas
        base = quotas.get((namespace, "", ""))
        if base is None and not any((namespace, t, "") in quotas for _, t in produce):
            return  # the usual call: nothing more to build
        # One entry per topic: a request may name one topic both qualified and by its namespace.
        per_topic: dict[str, tuple[int, int, int]] = {}
        for (_, topic), (msgs, size, largest) in produce.items():
            had_msgs, had_size, had_largest = per_topic.get(topic, (0, 0, 0))
            per_topic[topic] = (had_msgs + msgs, had_size + size, max(had_largest, largest))
        overrides = [(t, quotas[(namespace, t, "")]) for t in per_topic if (namespace, t, "") in quotas]
        now = self._clock()
        takes: list[tuple[TokenBucket, float, str]] = []

        def add(scope: tuple[str, str, str], limits: Mapping[str, int], msgs: int, size: int) -> None:
            for name, amount in (("produce_messages_per_s", msgs), ("produce_bytes_per_s", size)):
                value = limits.get(name)
                if value is not None:
                    takes.append((self._bucket(scope, name, value, now), amount, f"{name} {value}"))

        if base is not None:
            limits = base.limits
            largest = max(v[2] for v in per_topic.values())
            max_bytes = limits.get("max_message_bytes")
            if max_bytes is not None and largest > max_bytes:
                raise BodyTooLarge(
                    f"message body is {largest} bytes; the plan of {namespace!r} allows {max_bytes}"
                )
            storage = limits.get("storage_bytes")
            if storage is not None and self._storage_bytes is not None:
                used = self._storage_bytes(namespace)
                if used >= storage:
                    raise StorageQuotaExceeded(
                        f"storage quota exceeded: namespace {namespace!r} holds {used} bytes of its "
                        f"{storage}-byte storage quota; produce is refused until retention frees space"
                    )
            add(
                (namespace, "", ""),
                limits,
                sum(v[0] for v in per_topic.values()),
                sum(v[1] for v in per_topic.values()),
            )
        for topic, quota in overrides:
            msgs, size, _ = per_topic[topic]
            add((namespace, topic, ""), quota.limits, msgs, size)
        for bucket, amount, what in takes:
            if not bucket.fits(amount, now):
                raise TooManyRequests(f"produce rate limit of {namespace!r} exceeded ({what})")
        for bucket, amount, _ in takes:
            bucket.debit(amount)

    # Consume

    def admit_consume(self, namespace: str, topic: str, group: str, wanted: int) -> int:
        """How many messages a receive may deliver now (<= ``wanted``); TOO_MANY_REQUESTS when none."""
        if not namespace:
            return wanted
        now = self._clock()
        allowed = wanted
        for scope, scoped in self._scoped_limits(namespace, topic=topic, group=group):
            for name in ("consume_messages_per_s", "consume_bytes_per_s"):
                value = scoped.get(name)
                if value is None:
                    continue
                tokens = self._bucket(scope, name, value, now).refill(now)
                counts_messages = name == "consume_messages_per_s"
                if (tokens < 1) if counts_messages else (tokens <= 0):  # bytes may go into debt once
                    raise TooManyRequests(f"consume rate limit of {namespace!r} exceeded ({name} {value})")
                if counts_messages:
                    allowed = min(allowed, int(tokens))
        return max(allowed, 1)

    def debit_consume(self, namespace: str, topic: str, group: str, messages: int, size: int) -> None:
        if not namespace or not messages:
            return
        now = self._clock()
        for scope, scoped in self._scoped_limits(namespace, topic=topic, group=group):
            for name, amount in (("consume_messages_per_s", messages), ("consume_bytes_per_s", size)):
                value = scoped.get(name)
                if value is not None:
                    self._bucket(scope, name, value, now).debit(amount)
