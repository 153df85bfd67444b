"""Tiered stores on a local-directory object store, with small segments so offload is cheap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.store import MessageToStore, PutResult
from dataplane.store.tiered import ObjectStore, ObjectStoreSettings, TierConfig, TieredMessageStore
from tests.unit.store.conftest import small_config

TOPIC = "ns%orders"
TieredFactory = Callable[..., TieredMessageStore]


def tier_config(url: str, **overrides: Any) -> TierConfig:
    values: dict[str, Any] = {
        "offload_after_ms": 0,
        "hot_retention_hours": 0,
        "tiered_retention_hours": 24,
        "interval_ms": 3_600_000,  # passes are run by the tests
        "block_bytes": 4096,
        "cache_bytes": 64 * 4096,
    }
    values.update(overrides)
    return TierConfig(ObjectStoreSettings(url=url), **values)


@pytest.fixture
def make_tiered(tmp_path: Path) -> Iterator[TieredFactory]:
    started: list[TieredMessageStore] = []

    def factory(
        objects: ObjectStore | None = None, store: dict[str, Any] | None = None, **tier: Any
    ) -> TieredMessageStore:
        config = small_config(tmp_path / "store", **(store or {}))
        s = TieredMessageStore(config, tier_config(f"file://{tmp_path}/objects", **tier), objects)
        s.start()
        started.append(s)
        return s

    yield factory
    for s in started:
        s.shutdown()


def put_many(
    store: TieredMessageStore, count: int, queues: int = 2, size: int = 300
) -> list[tuple[PutResult, bytes]]:
    """``count`` messages with distinct bodies, keys k<i>, ids U<i>, tags a/b; returns results + bodies."""
    out = []
    for i in range(count):
        body = (f"{i:06d}-".encode() * (size // 7 + 1))[:size]
        msg = MessageToStore(
            TOPIC,
            i % queues,
            body,
            {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:06d}", "TAGS": "b" if i % 3 == 0 else "a"},
        )
        result = store.put_messages([msg])
        assert result.ok
        out.append((result, body))
    store.commit_log.flush()
    return out
