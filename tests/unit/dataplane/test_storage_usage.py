"""StorageUsage read from the metrics thread while the event loop counts sends and rescans."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

from dataplane.storage_usage import StorageUsage
from dataplane.store.consume_queue import CQ_ENTRY, ConsumeQueueTable
from tests.conftest import reader_racing

SIZE = 100
ROUNDS = 10_000


def test_a_reader_on_another_thread_never_sees_the_total_go_back(tmp_path: Path) -> None:
    # given: a real ConsumeQueueTable, so a rescan counts exactly the record sizes the sends added
    table = ConsumeQueueTable(tmp_path, 100_000)
    usage = StorageUsage(SimpleNamespace(consume_queues=table))
    seen: list[int] = []

    def read() -> None:  # the prometheus endpoint's thread
        seen.append(usage.tenant_bytes("t0"))
        seen.append(usage.tenant_totals().get("t0", 0))

    # when: sends are counted and rescans run while another thread reads
    with reader_racing(read) as race:
        for i in range(ROUNDS):
            tenant = "t0" if i % 1000 else f"t{i}"  # new tenants now and then: the pending dict grows
            cq = table.find_or_create(f"{tenant}%orders", 0)
            cq.put(cq.max_offset, CQ_ENTRY.pack(i * SIZE, SIZE, 0))
            usage.added(tenant, SIZE)
            usage.rescan()

    # then: tenant t0's bytes only ever grew, so no reading is below an earlier one; the last is exact
    assert race.errors == []
    assert race.readings > 0
    drops = [(a, b) for a, b in itertools.pairwise(seen) if b < a]
    assert drops == [], f"{len(drops)} readings went back, e.g. {drops[:3]}"
    usage.rescan()
    assert sum(usage.tenant_totals().values()) == ROUNDS * SIZE
