"""fifo_bench's order check: store order is the reference, not send order."""

from __future__ import annotations

from bench.fifo_bench import check_order


def test_store_order_is_the_reference() -> None:
    # group mg-0000: seq 1 was stored before seq 0 (two requests in flight) and delivered so
    seen = {"mg-0000": [(0, 1), (1, 0)], "mg-0001": [(0, 0), (1, 1)]}
    assert check_order(seen, count=4, groups=2) == {"violations": 0, "duplicates": 0, "missing": 0}


def test_a_message_delivered_ahead_of_one_stored_before_it_is_a_violation() -> None:
    seen = {"mg-0000": [(1, 1), (0, 0)], "mg-0001": [(0, 0), (1, 1), (1, 1)]}
    assert check_order(seen, count=6, groups=2) == {"violations": 1, "duplicates": 1, "missing": 2}
