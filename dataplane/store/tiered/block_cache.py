"""A bounded read-ahead block cache over ranged GETs, with prefetch for sequential readers.

Objects are read in aligned blocks of ``block_size`` bytes; at most ``capacity_bytes`` of blocks are
kept (least recently used evicted first). Two readers of the same missing block share one GET. When
a reader moves from block n-1 to block n of an object, the next ``prefetch_blocks`` blocks are
fetched in the background, so a sequential consumer finds them in the cache.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections import OrderedDict

from dataplane.store.errors import StoreError
from dataplane.store.tiered.object_store import ObjectStore

__all__ = ("BlockCache",)

logger = logging.getLogger(__name__)

_Key = tuple[str, int]


class BlockCache:
    """Thread-safe; ``hits``/``misses`` count blocks served from memory / fetched for a reader."""

    def __init__(
        self,
        objects: ObjectStore,
        block_size: int = 1 << 20,
        capacity_bytes: int = 64 << 20,
        prefetch_blocks: int = 4,
        workers: int = 4,
    ) -> None:
        self.objects = objects
        self.block_size = block_size
        self.capacity_blocks = max(2, capacity_bytes // block_size)
        self.prefetch_blocks = prefetch_blocks
        self._blocks: OrderedDict[_Key, bytes] = OrderedDict()
        self._inflight: dict[_Key, concurrent.futures.Future[bytes]] = {}
        self._last_block: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="TierPrefetch"
        )
        self.hits = 0
        self.misses = 0
        self.prefetched = 0
        self.bytes_fetched = 0

    @property
    def cached_bytes(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._blocks.values())

    def read(self, key: str, object_size: int, position: int, length: int) -> bytes:
        """``length`` bytes at ``position`` of object ``key`` (fewer only at the object's end)."""
        if position < 0 or length < 0:
            raise StoreError(f"{key}: bad range {position}+{length}")
        end = min(position + length, object_size)
        if position >= end:
            return b""
        bs = self.block_size
        first, last = position // bs, (end - 1) // bs
        if first == last:
            data = self._block(key, object_size, first)
            self._maybe_prefetch(key, object_size, first, last)
            offset = position - first * bs
            return data[offset : offset + (end - position)]
        # several blocks: copy only the wanted bytes of each, once
        out = bytearray(end - position)
        at = 0
        for n in range(first, last + 1):
            block = memoryview(self._block(key, object_size, n))
            lo = max(position - n * bs, 0)
            hi = min(end - n * bs, len(block))
            out[at : at + hi - lo] = block[lo:hi]
            at += hi - lo
        self._maybe_prefetch(key, object_size, first, last)
        return bytes(out) if len(out) <= 65536 else out  # type: ignore[return-value]

    def _block(self, key: str, object_size: int, number: int) -> bytes:
        bkey = (key, number)
        with self._lock:
            block = self._blocks.get(bkey)
            if block is not None:
                self._blocks.move_to_end(bkey)
                self.hits += 1
                return block
            future = self._inflight.get(bkey)
            owner = future is None
            if future is None:
                future = self._inflight[bkey] = concurrent.futures.Future()
                self.misses += 1
            else:
                self.hits += 1  # a prefetch (or another reader) is already fetching it
        if owner:
            self._fetch(bkey, object_size, future)
        return future.result()

    def _fetch(self, bkey: _Key, object_size: int, future: concurrent.futures.Future[bytes]) -> None:
        key, number = bkey
        start = number * self.block_size
        try:
            data = self.objects.get_range(key, start, min(self.block_size, object_size - start))
        except Exception as exc:  # noqa: BLE001 - handed to the waiters, who must never hang
            with self._lock:
                self._inflight.pop(bkey, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._inflight.pop(bkey, None)
            self.bytes_fetched += len(data)
            self._blocks[bkey] = data
            while len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        future.set_result(data)

    def _maybe_prefetch(self, key: str, object_size: int, first: int, last: int) -> None:
        if self.prefetch_blocks <= 0:
            return
        with self._lock:
            previous = self._last_block.get(key)
            self._last_block[key] = last
            if len(self._last_block) > 4096:
                self._last_block.pop(next(iter(self._last_block)))
            if previous is None or not previous <= first <= previous + 1:
                return
            total = (object_size + self.block_size - 1) // self.block_size
            wanted = []
            for n in range(last + 1, min(total, last + 1 + self.prefetch_blocks)):
                bkey = (key, n)
                if bkey in self._blocks or bkey in self._inflight:
                    continue
                future: concurrent.futures.Future[bytes] = concurrent.futures.Future()
                self._inflight[bkey] = future
                wanted.append((bkey, future))
            self.prefetched += len(wanted)
        for bkey, future in wanted:
            try:
                self._pool.submit(self._prefetch, bkey, object_size, future)
            except RuntimeError:  # shut down
                with self._lock:
                    self._inflight.pop(bkey, None)
                future.cancel()

    def _prefetch(self, bkey: _Key, object_size: int, future: concurrent.futures.Future[bytes]) -> None:
        self._fetch(bkey, object_size, future)
        if future.exception() is not None:
            logger.debug("tier prefetch of %s block %d failed: %s", bkey[0], bkey[1], future.exception())

    def invalidate(self, key: str) -> None:
        """Forget every block of ``key`` (the object was deleted)."""
        with self._lock:
            for bkey in [k for k in self._blocks if k[0] == key]:
                del self._blocks[bkey]
            self._last_block.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            pending = list(self._inflight.values())
            self._inflight.clear()
        for future in pending:
            if not future.done():
                future.set_exception(StoreError("tier block cache closed"))
