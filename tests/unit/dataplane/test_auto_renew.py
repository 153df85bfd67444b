"""The registry of auto-renewed messages: due in check-time order, taken out when due, forgotten
when acked, expedited for a leaving client, and bounded while acks outpace the check times."""

from __future__ import annotations

from dataplane.auto_renew import AutoRenewals, Renewal


def _key(offset: int) -> tuple[str, str, int, int]:
    return ("g", "t", 0, offset)


def test_due_in_check_time_order_and_taken_out() -> None:
    renewals = AutoRenewals()
    for offset, check in ((1, 300), (2, 100), (3, 200)):
        renewals.add(_key(offset), Renewal("n", "c", 0, check))
    assert [k[3] for k, _ in renewals.due(250)] == [2, 3]
    assert len(renewals) == 1
    assert renewals.due(250) == []
    renewal = renewals.due(300)[0][1]
    renewal.check_ms = 900  # renewed: put back with its next check time
    renewals.add(_key(1), renewal)
    assert renewals.due(800) == [] and [k[3] for k, _ in renewals.due(900)] == [1]


def test_acked_and_superseded_items_are_not_due() -> None:
    renewals = AutoRenewals()
    renewals.add(_key(1), Renewal("n", "c", 0, 100))
    renewals.add(_key(2), Renewal("n", "c", 0, 100))
    renewals.discard(_key(1))
    renewals.add(_key(2), Renewal("n2", "c", 0, 500))  # registered again (a new receive)
    assert renewals.due(100) == []
    assert [(k[3], r.nonce) for k, r in renewals.due(500)] == [(2, "n2")]


def test_a_leaving_clients_registrations_become_due() -> None:
    renewals = AutoRenewals()
    renewals.add(_key(1), Renewal("n", "leaving", 0, 10_000))
    renewals.add(_key(2), Renewal("n", "staying", 0, 10_000))
    assert renewals.expedite("leaving", 50) == 1
    assert [k[3] for k, _ in renewals.due(50)] == [1]
    assert len(renewals) == 1


def test_the_heap_stays_bounded_when_acks_come_first() -> None:
    renewals = AutoRenewals()
    for offset in range(100_000):
        renewals.add(_key(offset), Renewal("n", "c", 0, 1_000_000 + offset))
        renewals.discard(_key(offset))
    assert len(renewals) == 0
    assert len(renewals._heap) <= 1024 + 1
