"""Writer process for test_crash_recovery: SYNC_FLUSH puts from 4 threads and from 8 asyncio tasks
(``put_messages_async``, appended together by the store's batcher), one ACK line per durable message.

Run as ``python -m tests.integration.store.crash_writer STORE_DIR RUN``; prints ``READY`` once started
and ``ACK <queue id> <queue offset> <uniq key>`` after each put returned PUT_OK. Killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import threading
from pathlib import Path

from dataplane.store import (
    AppendEntry,
    FlushDiskType,
    MessageStore,
    MessageStoreConfig,
    MessageToStore,
    PutMessageStatus,
)

TOPIC = "ns%crash"
QUEUES = 3


def expected_body(uniq: str) -> bytes:
    digest = hashlib.sha256(uniq.encode()).digest()
    return digest * (1 + digest[0] % 48)


def crash_config(store_dir: Path) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_dir,
        mapped_file_size_commit_log=128 * 1024,
        consume_queue_entries_per_file=500,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        index_hash_slot_num=512,
        index_max_num=5000,
        flush_consume_queue_interval_ms=50,
        check_crc_on_read=True,
    )


def main() -> None:
    store = MessageStore(crash_config(Path(sys.argv[1])))
    run = sys.argv[2]
    store.start()
    out_lock = threading.Lock()
    print("READY", flush=True)

    def ack(batch: list[MessageToStore], entries: list[AppendEntry]) -> None:
        lines = "".join(
            f"ACK {m.queue_id} {e.queue_offset} {m.properties['UNIQ_KEY']}\n"
            for m, e in zip(batch, entries, strict=True)
        )
        with out_lock:
            sys.stdout.write(lines)
            sys.stdout.flush()

    def writer(thread: int) -> None:
        seq = 0
        while True:
            batch = []
            for _ in range(1 + seq % 4):
                uniq = f"{run}-{thread}-{seq}"
                seq += 1
                qid = (thread + seq) % QUEUES
                props = {"UNIQ_KEY": uniq, "KEYS": uniq}
                batch.append(MessageToStore(TOPIC, qid, expected_body(uniq), props))
            result = store.put_messages(batch)
            if result.status is not PutMessageStatus.PUT_OK:
                continue
            ack(batch, result.entries)

    async def async_writer(task: int) -> None:
        seq = 0
        while True:
            batch = []
            for _ in range(1 + seq % 3):
                uniq = f"{run}-a{task}-{seq}"
                seq += 1
                props = {"UNIQ_KEY": uniq, "KEYS": uniq}
                batch.append(MessageToStore(TOPIC, (task + seq) % QUEUES, expected_body(uniq), props))
            result = await store.put_messages_async(batch)
            if result.status is not PutMessageStatus.PUT_OK:
                continue
            ack(batch, result.entries)

    async def async_writers() -> None:
        await asyncio.gather(*(async_writer(i) for i in range(8)))

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(4)]
    threads.append(threading.Thread(target=asyncio.run, args=(async_writers(),), daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
