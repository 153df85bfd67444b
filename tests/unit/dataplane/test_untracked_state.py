"""Per-message state the broker keeps for a while is not walked by the garbage collector.

A full collection walks every object the collector tracks, on the event loop. The POP state keeps an
entry per unacked message (a group may hold 100,000) and the tracer a pending event per delivery and
ack; as objects of a class they were all tracked, and 100,000 in flight made each full collection
~9 ms longer. As plain tuples of strings and ints the collector stops tracking them at their first
collection, so the number of tracked objects does not grow with them.
"""

from __future__ import annotations

import gc
from pathlib import Path

from dataplane.pop import PopState
from dataplane.trace import MessageTracer


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def test_in_flight_entries_are_not_tracked_by_the_collector(tmp_path: Path) -> None:
    state = PopState(tmp_path, initial_offset=lambda g, t, q: 0, on_commit=lambda *a: None)
    before = _tracked()
    for start in range(0, 5000, 32):  # receives of 32
        state.deliver_new("g", "t", 0, list(range(start, start + 32)), 60_000)
    for offset in range(0, 5000, 7):  # redeliveries and a backoff: deliver() builds its own entries
        state.deliver("g", "t", 0, offset, 2, 90_000, 5024, waiting=offset % 2 == 0)
    pos = state.position("g", "t", 0)
    assert len(pos.in_flight) == 5024
    assert _tracked() - before < 100
    assert not any(gc.is_tracked(entry) for entry in pos.in_flight.values())
    state.close()


def test_pending_trace_events_are_not_tracked_by_the_collector() -> None:
    class Store:  # what the tracer asks of a store before it traces at all
        def query_messages_by_key(self, *args: object) -> list[object]:
            return []

    tracer = MessageTracer(Store())
    before = _tracked()
    for i in range(2000):
        tracer.record(f"m{i}", "ns%t", "acked", group="ns%g", attempt=1, client_id="c1")
    tracer.record_many([(f"n{i}", 1) for i in range(2000)], "ns%t", "delivered", group="ns%g")
    assert _tracked() - before < 100
    assert tracer.events("m7")[0].attempt == 1  # read back as TraceEvents
