"""TieredMessageStore over a local-directory object store: offload, local deletion, cold reads,
retention, recovery from the manifest, and what happens when the object store fails."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dataplane.store import GetMessageStatus, MessageToStore
from dataplane.store.tiered import ObjectStoreUnavailableError, TieredMessageStore
from dataplane.store.tiered.manifest import MANIFEST_KEY, commitlog_key
from dataplane.store.tiered.object_store import (
    ObjectInfo,
    ObjectStore,
    ObjectStoreSettings,
    open_object_store,
)
from tests.unit.store.tiered.conftest import TOPIC, TieredFactory, put_many


def drain(store: TieredMessageStore, queue_id: int, start: int | None = None, **kw: object) -> list[bytes]:
    offset = store.get_min_offset_in_queue(TOPIC, queue_id) if start is None else start
    bodies: list[bytes] = []
    for _ in range(10_000):
        result = store.get_messages(TOPIC, queue_id, offset, 7, **kw)  # type: ignore[arg-type]
        if result.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            return bodies
        assert result.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE), result.status
        bodies.extend(m.body for m in result.messages)
        offset = result.next_begin_offset
    raise AssertionError("drain did not end")


def offload_and_delete(store: TieredMessageStore) -> int:
    offloaded = store.offloader.run_once()
    store.delete_expired_files()
    return offloaded


def test_offload_delete_local_and_read_back_byte_for_byte(make_tiered: TieredFactory) -> None:
    # given
    store = make_tiered()
    sent = put_many(store, 300)
    segments = len(store.commit_log.queue.files)
    # when
    offloaded = offload_and_delete(store)
    # then: every sealed segment went up and left the disk; only the active one is local
    assert offloaded == segments - 1
    assert len(store.commit_log.queue.files) == 1
    assert store.commit_log.min_offset == store.view.end_offset
    commitlog_dir = store.config.store_dir / "commitlog"
    assert len(list(commitlog_dir.iterdir())) == 1
    for q in (0, 1):
        assert store.get_min_offset_in_queue(TOPIC, q) == 0
        assert drain(store, q) == [body for i, (_, body) in enumerate(sent) if i % 2 == q]


def test_cold_reads_by_key_id_time_and_tag(make_tiered: TieredFactory) -> None:
    store = make_tiered()
    sent = put_many(store, 200)
    offload_and_delete(store)
    first_result, first_body = sent[3]
    entry = first_result.entries[0]
    assert entry.physical_offset < store.commit_log.min_offset  # really cold
    # by key and client id (tier index), by offset message id, by physical offset
    assert [m.body for m in store.query_messages_by_key(TOPIC, "k3")] == [first_body]
    assert [m.body for m in store.query_messages_by_uniq_key("U000003")] == [first_body]
    found = store.look_message_by_id(entry.msg_id)
    assert found is not None and found.body == first_body
    assert store.look_message_by_offset(entry.physical_offset).body == first_body
    assert store.query_messages_by_key(TOPIC, "nope") == []
    # offset by time and store time over the cold range
    assert store.get_store_time(TOPIC, 1, entry.queue_offset) == entry.store_timestamp
    assert store.get_offset_in_queue_by_time(TOPIC, 1, entry.store_timestamp) <= entry.queue_offset
    assert store.get_offset_in_queue_by_time(TOPIC, 1, 0) == 0
    # a tag filter skips the other tag across the tier and the local log
    tagged = drain(store, 0, tag_filter={"b"})
    assert tagged == [body for i, (_, body) in enumerate(sent) if i % 2 == 0 and i % 3 == 0]


def test_prefetch_serves_sequential_cold_reads_from_the_cache(make_tiered: TieredFactory) -> None:
    store = make_tiered(store={"mapped_file_size_commit_log": 64 * 1024})
    put_many(store, 500, queues=1)
    offload_and_delete(store)
    drain(store, 0)
    cache = store.cache
    assert cache.prefetched > 0
    assert cache.hits > cache.misses
    assert cache.cached_bytes <= cache.capacity_blocks * cache.block_size
    status = store.tier_status()
    assert status.cache_hit_rate > 0.5
    assert status.tiered_segments >= 1 and status.offload_lag_bytes == 0
    (topic,) = status.topics
    assert topic.topic == TOPIC and topic.tiered_bytes > 0 and topic.local_bytes > 0


def test_nothing_is_deleted_locally_before_it_is_offloaded(make_tiered: TieredFactory) -> None:
    store = make_tiered(offload_after_ms=3_600_000, offload_pending_bytes=1 << 40)
    put_many(store, 200)
    before = len(store.commit_log.queue.files)
    assert store.offloader.run_once() == 0  # too young and not enough waiting
    assert store.delete_expired_files() == 0
    assert len(store.commit_log.queue.files) == before
    assert store.tier_status().offload_lag_bytes == (before - 1) * store.config.mapped_file_size_commit_log


def test_only_confirmed_segments_and_only_on_the_master(make_tiered: TieredFactory) -> None:
    store = make_tiered()
    put_many(store, 200)
    size = store.config.mapped_file_size_commit_log
    store.set_tier_hooks(is_master=lambda: False)
    assert store.offloader.run_once() == 0
    store.set_tier_hooks(is_master=lambda: True, confirmed_offset=lambda: 2 * size)
    assert store.offloader.run_once() == 2
    assert store.view.end_offset == 2 * size


class FlakyStore:
    """Wraps a real store; fails puts while ``down``, corrupts them while ``corrupt``."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.down = False
        self.corrupt = False

    def put(self, key: str, data: bytes | memoryview | Path) -> ObjectInfo:
        if self.down:
            raise ObjectStoreUnavailableError(f"object store: {key!r}: connection refused")
        if self.corrupt and not key.endswith(MANIFEST_KEY):
            raw = bytearray(bytes(data) if not isinstance(data, Path) else data.read_bytes())
            raw[len(raw) // 2] ^= 0xFF
            data = bytes(raw)
        return self.inner.put(key, data)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def get_range(self, key: str, start: int, length: int) -> bytes | memoryview:
        if self.down:
            raise ObjectStoreUnavailableError("down")
        return self.inner.get_range(key, start, length)

    def get(self, key: str) -> bytes:
        if self.down:
            raise ObjectStoreUnavailableError("down")
        return self.inner.get(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)


@pytest.mark.parametrize(
    "failure", [pytest.param("down", id="outage"), pytest.param("corrupt", id="corrupt")]
)
def test_failed_upload_keeps_local_data_and_is_retried(
    tmp_path: Path, make_tiered: TieredFactory, failure: str
) -> None:
    flaky = FlakyStore(open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/flaky")))
    store = make_tiered(objects=flaky)
    sent = put_many(store, 150)
    setattr(flaky, failure, True)
    # when
    assert offload_and_delete(store) == 0
    # then: the manifest did not move, nothing local was deleted, the failure is visible
    status = store.tier_status()
    assert status.tiered_segments == 0 and status.offload_failures == 1 and status.last_error
    assert store.commit_log.min_offset == 0
    assert drain(store, 0) == [b for i, (_, b) in enumerate(sent) if i % 2 == 0]
    # and once the store is healthy again the same segments go up
    setattr(flaky, failure, False)
    assert offload_and_delete(store) > 0
    assert store.commit_log.min_offset > 0
    assert drain(store, 1) == [b for i, (_, b) in enumerate(sent) if i % 2 == 1]


def test_restart_reads_the_manifest_and_serves_cold_data(make_tiered: TieredFactory, tmp_path: Path) -> None:
    store = make_tiered()
    sent = put_many(store, 200)
    offload_and_delete(store)
    generation = store.manifest.generation
    store.shutdown()
    # the local copy is gone: the object in the store is authoritative
    (store.config.store_dir / "tiered" / "manifest.json").unlink()
    again = make_tiered()
    assert again.manifest.generation == generation
    assert drain(again, 0) == [b for i, (_, b) in enumerate(sent) if i % 2 == 0]
    # a partial upload left by a crash (object without a manifest entry) is overwritten, not listed
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/objects"))
    nxt = again.view.end_offset
    objects.put(commitlog_key(nxt), b"partial")
    put_many(again, 100)
    offload_and_delete(again)
    assert objects.head(commitlog_key(nxt)).size == again.config.mapped_file_size_commit_log
    manifest = json.loads(objects.get(MANIFEST_KEY))
    starts = [s["start"] for s in manifest["segments"]]
    assert starts == sorted(starts) and nxt in starts


def test_tiered_retention_deletes_objects_and_moves_the_minimum(
    make_tiered: TieredFactory, tmp_path: Path
) -> None:
    store = make_tiered()
    put_many(store, 200)
    offload_and_delete(store)
    first = store.view.segments[0]
    objects = open_object_store(ObjectStoreSettings(url=f"file://{tmp_path}/objects"))
    # when: a pass runs after hot + tiered retention (0 h + 24 h)
    store.offloader.run_once(now_ms=first.max_ts + 25 * 3_600_000)
    # then
    assert store.view.segments == [] and store.tier_status().segments_expired > 0
    assert not [k for k in objects.list("commitlog") if k.endswith(commitlog_key(first.start))]
    local_min = store.consume_queues.find(TOPIC, 0)
    assert local_min is not None
    assert store.get_min_offset_in_queue(TOPIC, 0) == local_min.min_offset > 0
    result = store.get_messages(TOPIC, 0, 0)
    assert result.status is GetMessageStatus.OFFSET_TOO_SMALL
    assert result.next_begin_offset == local_min.min_offset


def test_per_topic_retention_expires_one_topic_logically(make_tiered: TieredFactory) -> None:
    store = make_tiered()
    other = "ns%audit"
    for i in range(120):
        assert store.put_messages([MessageToStore(other if i % 2 else TOPIC, 0, b"x" * 300)]).ok
    store.commit_log.flush()  # only flushed (confirmed) bytes are offloaded
    store.set_tier_hooks(retention=lambda topic: (0.0, 0.0) if topic == other else (0.0, 24.0))
    offload_and_delete(store)
    time.sleep(0.01)  # store times are in ms: let "now" pass the newest one
    # audit keeps nothing past its (zero) hot retention; orders keeps its tiered history
    assert store.get_min_offset_in_queue(TOPIC, 0) == 0
    assert store.get_min_offset_in_queue(other, 0) > 0
    assert store.view.segments  # the objects stay: orders still needs them


def test_ha_node_gates_offload_by_role_and_sync_state_set(make_tiered: TieredFactory, tmp_path: Path) -> None:
    """build_ha wires the tier hooks: a replica never offloads; a master offloads only what every
    other SyncStateSet member has confirmed (a new master then never lacks an offloaded segment)."""
    from types import SimpleNamespace

    from dataplane.config import BrokerSettings
    from dataplane.ha.service import ReplicaState
    from dataplane.ha_writes import build_ha
    from mqcloud.ha.v1 import controller_pb2 as c

    store = make_tiered()
    put_many(store, 200)
    size = store.config.mapped_file_size_commit_log
    settings = BrokerSettings(
        data_dir=tmp_path / "broker", controller="127.0.0.1:1", ha_node="n0", broker_name="g", ha_secret="s"
    )
    broker = SimpleNamespace(settings=settings, store=store, metadata=None, transactions=None)
    node = build_ha(broker)  # type: ignore[arg-type]
    assert node is not None

    assert store.offloader.run_once() == 0  # no role yet: not the master
    node.role, node.lease_deadline = c.MASTER, time.monotonic() + 60
    node.sync_state_set = ["n0", "n1"]
    assert store.offloader.run_once() == 0  # n1 is in the SyncStateSet and confirmed nothing
    replica = ReplicaState("n1", "127.0.0.1:2")
    replica.confirmed = 2 * size + 10
    node.service.replicas["n1"] = replica
    assert node.confirmed_offset() == 2 * size + 10
    assert store.offloader.run_once() == 2  # the two sealed segments n1 holds
    replica.confirmed = store.commit_log.flushed_offset
    node.role = c.REPLICA  # demoted: nothing more is offloaded
    assert store.offloader.run_once() == 0
    node.role = c.MASTER
    node.sync_state_set = ["n0"]  # alone in the set: up to its own flushed offset
    assert node.confirmed_offset() == store.commit_log.flushed_offset
    assert store.offloader.run_once() > 0
