"""Messages of push consumers kept invisible while they are consumed (ReceiveMessage ``auto_renew``).

Push consumers receive with ``auto_renew`` set, and the official ones send no invisible duration:
they leave it to the server to keep a message from coming back while it waits in the client's cache
or its listener runs (RocketMQ's proxy renews them). Without that, a listener slower than the
invisible time (30 s by default) gets the message again, and so does another member.

Each message received so is registered here with the client that took it. Every
``auto_renew_period_s`` the broker (:meth:`dataplane.broker.Broker.renew_auto`) extends, by
``auto_renew_slice_ms``, the invisible time of those within ``auto_renew_ahead_ms`` of running out,
while their client is connected and for at most ``auto_renew_max_ms`` after the receive (the
proxy's defaults: 10 s ahead, 3 h at most, every 5 s). The receipt handle the client holds stays
valid: the renewal keeps its nonce. When the client has gone, the message is left invisible for
``auto_renew_released_ms`` more (1 s, as the proxy) and comes back to the group: at once when it
said so (NotifyClientTermination), ``auto_renew_gone_after_s`` after its Telemetry stream ended when
it made no call since (a crash), else at its next look. An ack, a
ChangeInvisibleDuration (a nack or the client's own renewal) or a redelivery ends the renewals of a
message: its handle is no longer the one registered.

In memory only, as the proxy's: after a restart or a failover a message is no longer renewed and
comes back when its current invisible time runs out.
"""

from __future__ import annotations

import dataclasses
import heapq

__all__ = ("AutoRenewals", "Renewal", "RenewalKey")

RenewalKey = tuple[str, str, int, int]  # POP group, topic, queue id, offset


@dataclasses.dataclass(slots=True)
class Renewal:
    nonce: str  # of the delivery renewed: another nonce means it was acked, nacked or redelivered
    client_id: str
    received_ms: int
    check_ms: int  # when to look at it next


class AutoRenewals:
    """Registered messages by key, and a heap of (check time, key) with stale items dropped lazily.

    Loop-thread only. The heap is rebuilt when acks leave it more than twice the registrations."""

    def __init__(self) -> None:
        self._renewals: dict[RenewalKey, Renewal] = {}
        self._heap: list[tuple[int, RenewalKey]] = []

    def __len__(self) -> int:
        return len(self._renewals)

    def add(self, key: RenewalKey, renewal: Renewal) -> None:
        self._renewals[key] = renewal
        heapq.heappush(self._heap, (renewal.check_ms, key))

    def discard(self, key: RenewalKey) -> None:
        if self._renewals.pop(key, None) is not None and len(self._heap) > 2 * len(self._renewals) + 1024:
            self._heap = [(r.check_ms, k) for k, r in self._renewals.items()]
            heapq.heapify(self._heap)

    def expedite(self, client_id: str, now_ms: int) -> int:
        """Make the registrations of ``client_id`` due at ``now_ms`` (the client said it is leaving);
        how many. A scan of every registration: clients leave far less often than they ack."""
        count = 0
        for key, renewal in self._renewals.items():
            if renewal.client_id == client_id and renewal.check_ms > now_ms:
                renewal.check_ms = now_ms
                heapq.heappush(self._heap, (now_ms, key))
                count += 1
        return count

    def due(self, now_ms: int) -> list[tuple[RenewalKey, Renewal]]:
        """The registrations whose check time has come, taken out (:meth:`add` puts one back)."""
        heap, renewals = self._heap, self._renewals
        found = []
        while heap and heap[0][0] <= now_ms:
            check_ms, key = heapq.heappop(heap)
            renewal = renewals.get(key)
            if renewal is not None and renewal.check_ms == check_ms:
                del renewals[key]
                found.append((key, renewal))
        return found
