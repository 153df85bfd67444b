"""Receive attempts remembered for their retries: recalled while recent, the oldest dropped past the
bound, a later receive of the same attempt replacing what the earlier one took."""

from __future__ import annotations

from dataplane.receive_attempts import ReceiveAttempts


def test_recalled_while_recent_and_replaced_by_a_later_receive() -> None:
    attempts = ReceiveAttempts(max_age_s=10)
    attempts.remember(("g", "t", "a"), [(0, 5, "n1")], now_s=100)
    assert attempts.recall(("g", "t", "a"), now_s=105) == [(0, 5, "n1")]
    assert attempts.recall(("g", "t", "b"), now_s=105) == []
    attempts.remember(("g", "t", "a"), [(1, 7, "n2")], now_s=106)
    assert attempts.recall(("g", "t", "a"), now_s=115) == [(1, 7, "n2")]
    assert attempts.recall(("g", "t", "a"), now_s=117) == []  # too old: forgotten
    assert len(attempts) == 0


def test_the_oldest_go_first_past_the_bound() -> None:
    attempts = ReceiveAttempts(max_attempts=3)
    for i in range(5):
        attempts.remember(("g", "t", str(i)), [(0, i, "n")], now_s=0)
    assert len(attempts) == 3
    assert attempts.recall(("g", "t", "1"), now_s=0) == []
    assert attempts.recall(("g", "t", "4"), now_s=0) == [(0, 4, "n")]
