"""A small in-memory message store with an append-only file, same API as ``dataplane.store``.

Only for tests and development (``MQ_BROKER_STORE_ENGINE=simple``): every message is kept in
memory and appended to ``{store_dir}/simple.log`` as a length-prefixed JSON line. It lets the broker
run while the CommitLog engine is not available; it is not a production store.
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataplane.store.message import (
    AppendEntry,
    GetResult,
    MessageToStore,
    PutResult,
    StoredMessage,
)
from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = ("SimpleConsumerOffsets", "SimpleMessageStore")

_LEN = struct.Struct(">I")
DispatchListener = Callable[[str, int, int], None]


class SimpleConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._table: dict[str, int] = {}
        if path.exists():
            self._table = json.loads(path.read_text())

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._table[f"{topic}@{group}@{queue_id}"] = offset

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._table.get(f"{topic}@{group}@{queue_id}")

    def persist(self) -> None:
        with self._lock:
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._table))
            tmp.replace(self._path)


class SimpleMessageStore:
    def __init__(self, config: Any) -> None:
        self._dir = Path(config.store_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._sync = str(getattr(config, "flush_disk_type", "")) == "SYNC_FLUSH"
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self._listeners: list[DispatchListener] = []
        self._physical = 0
        self._file: Any = None
        self.consumer_offsets = SimpleConsumerOffsets(self._dir / "consumer_offsets.json")

    def start(self) -> None:
        log = self._dir / "simple.log"
        if log.exists():
            data = log.read_bytes()
            pos = 0
            while pos + 4 <= len(data):
                (size,) = _LEN.unpack_from(data, pos)
                if pos + 4 + size > len(data):
                    break
                self._load(json.loads(data[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            with open(log, "r+b") as f:
                f.truncate(pos)
        self._file = open(log, "ab")  # noqa: SIM115 - closed in shutdown()

    def _load(self, rec: dict[str, Any]) -> StoredMessage:
        msg = StoredMessage(
            topic=rec["topic"],
            queue_id=rec["queue_id"],
            queue_offset=rec["queue_offset"],
            physical_offset=rec["physical_offset"],
            body=base64.b64decode(rec["body"]),
            properties=rec["properties"],
            store_timestamp=rec["store_timestamp"],
            born_timestamp=rec["born_timestamp"],
            born_host=tuple(rec["born_host"]),  # type: ignore[arg-type]
            store_host=("127.0.0.1", 10911),
            reconsume_times=rec["reconsume_times"],
            sys_flag=0,
            flag=0,
            prepared_transaction_offset=0,
            size=len(rec["body"]),
            body_crc=0,
        )
        self._queues.setdefault((msg.topic, msg.queue_id), []).append(msg)
        self._physical = max(self._physical, msg.physical_offset + 1)
        return msg

    def shutdown(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
        self.consumer_offsets.persist()

    def add_dispatch_listener(self, listener: DispatchListener) -> None:
        self._listeners.append(listener)

    def put_messages(self, msgs: list[MessageToStore]) -> PutResult:
        entries = []
        notify = []
        with self._lock:
            for m in msgs:
                queue = self._queues.get((m.topic, m.queue_id), [])
                rec = {
                    "topic": m.topic,
                    "queue_id": m.queue_id,
                    "queue_offset": len(queue),
                    "physical_offset": self._physical,
                    "body": base64.b64encode(m.body).decode(),
                    "properties": m.properties,
                    "store_timestamp": int(time.time() * 1000),
                    "born_timestamp": m.born_timestamp,
                    "born_host": list(m.born_host),
                    "reconsume_times": m.reconsume_times,
                }
                raw = json.dumps(rec).encode()
                self._file.write(_LEN.pack(len(raw)) + raw)
                stored = self._load(rec)
                entries.append(
                    AppendEntry(
                        stored.physical_offset,
                        stored.queue_offset,
                        stored.store_timestamp,
                        stored.msg_id,
                        stored.size,
                    )
                )
                notify.append((m.topic, m.queue_id, stored.queue_offset + 1))
            self._file.flush()
            if self._sync:
                os.fsync(self._file.fileno())
        for topic, qid, max_offset in notify:
            for listener in self._listeners:
                listener(topic, qid, max_offset)
        return PutResult(PutMessageStatus.PUT_OK, entries)

    async def put_messages_async(self, msgs: list[MessageToStore]) -> PutResult:
        return self.put_messages(msgs)

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        max_bytes: int = 4 << 20,
        tag_filter: set[str] | frozenset[str] | None = None,
    ) -> GetResult:
        queue = self._queues.get((topic, queue_id), [])
        max_offset = len(queue)
        if offset >= max_offset:
            status = (
                GetMessageStatus.NO_MESSAGE_IN_QUEUE if not queue else GetMessageStatus.OFFSET_OVERFLOW_ONE
            )
            return GetResult(status, [], max_offset, 0, max_offset)
        out: list[StoredMessage] = []
        size = 0
        pos = max(offset, 0)
        while pos < max_offset and len(out) < max_count and size < max_bytes:
            msg = queue[pos]
            pos += 1
            if tag_filter is not None and msg.properties.get("TAGS") not in tag_filter:
                continue
            out.append(msg)
            size += len(msg.body)
        status = GetMessageStatus.FOUND if out else GetMessageStatus.NO_MATCHED_MESSAGE
        return GetResult(status, out, pos, 0, max_offset)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return len(self._queues.get((topic, queue_id), []))

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._queues.get((topic, queue_id), [])
        times = [m.store_timestamp for m in queue]
        return bisect.bisect_left(times, timestamp_ms)
