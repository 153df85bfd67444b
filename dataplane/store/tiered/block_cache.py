"""A bounded read-ahead block cache over ranged GETs, with prefetch for sequential readers.

Objects are read in aligned blocks of ``block_size`` bytes; at most ``capacity_bytes`` of blocks are
kept (least recently used evicted first). Two readers of the same missing block share one GET. When
a reader moves from block n-1 to block n of an object, the next ``prefetch_blocks`` blocks are
fetched in the background, so a sequential consumer finds them in the cache: one ranged GET for the
whole window; once the reader is inside it, the next window (twice as wide, up to a maximum) follows.
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
        readahead_max_bytes: int = 16 << 20,
    ) -> None:
        self.objects = objects
        self.block_size = block_size
        self.capacity_blocks = max(2, capacity_bytes // block_size)
        self.prefetch_blocks = prefetch_blocks
        # a sequential reader's window doubles at each refill up to this (a quarter of the cache at most)
        self.max_window = max(
            prefetch_blocks, min(readahead_max_bytes // block_size, self.capacity_blocks // 4)
        )
        self._blocks: OrderedDict[_Key, memoryview] = OrderedDict()
        self._inflight: dict[_Key, concurrent.futures.Future[memoryview]] = {}
        self._last_block: dict[str, int] = {}
        self._frontier: dict[str, int] = {}  # highest block of each object read ahead so far
        self._window: dict[str, int] = {}  # current read-ahead window of each object, in blocks
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
            return sum(b.nbytes for b in self._blocks.values())

    def read(self, key: str, object_size: int, position: int, length: int) -> bytes:
        """``length`` bytes at ``position`` of object ``key`` (fewer only at the object's end)."""
        views = self.read_views(key, object_size, position, length)
        if len(views) == 1:
            return bytes(views[0][1])
        return b"".join(view for _, view in views)

    def read_views(
        self, key: str, object_size: int, position: int, length: int
    ) -> list[tuple[int, memoryview]]:
        """The same range as read-only views of the cached blocks it spans, each with the position
        of its first byte in the object: nothing copied (a batch of records is decoded from them;
        a record across two blocks is in neither view whole, and is read with :meth:`read`)."""
        if position < 0 or length < 0:
            raise StoreError(f"{key}: bad range {position}+{length}")
        end = min(position + length, object_size)
        if position >= end:
            return []
        bs = self.block_size
        first, last = position // bs, (end - 1) // bs
        # read-ahead first: its GET then runs while this reader waits for its own block (a miss)
        self._maybe_prefetch(key, object_size, first, last)
        views = []
        for n in range(first, last + 1):
            block = self._block(key, object_size, n)
            lo = max(position - n * bs, 0)
            hi = min(end - n * bs, len(block))
            views.append((n * bs + lo, block[lo:hi]))
        return views

    def _block(self, key: str, object_size: int, number: int) -> memoryview:
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

    def _fetch(self, bkey: _Key, object_size: int, future: concurrent.futures.Future[memoryview]) -> None:
        self._fetch_run(bkey[0], object_size, [(bkey[1], future)])

    def _fetch_run(
        self, key: str, object_size: int, run: list[tuple[int, concurrent.futures.Future[memoryview]]]
    ) -> None:
        """One ranged GET for the consecutive blocks of ``run``, split into blocks: a GET costs the
        same fixed time whether it asks for 1 or 4 MiB (moto on loopback: 25-30 ms; S3: its
        time to first byte), so read-ahead asks for its whole window at once."""
        bs = self.block_size
        first = run[0][0]
        start = first * bs
        try:
            data = self.objects.get_range(key, start, min(len(run) * bs, object_size - start))
        except Exception as exc:  # noqa: BLE001 - handed to the waiters, who must never hang
            with self._lock:
                for number, _ in run:
                    self._inflight.pop((key, number), None)
            for _, future in run:
                future.set_exception(exc)
            return
        # views into the one buffer of the GET, not copies: a window's blocks are evicted together
        # (inserted together, read in order), so the buffer outlives its first evicted block briefly
        view = memoryview(data)
        blocks = [view[i * bs : (i + 1) * bs] for i in range(len(run))]
        with self._lock:
            self.bytes_fetched += view.nbytes
            for (number, _), block in zip(run, blocks, strict=True):
                bkey = (key, number)
                self._inflight.pop(bkey, None)
                self._blocks[bkey] = block
            while len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        for (_, future), block in zip(run, blocks, strict=True):
            future.set_result(block)

    def _maybe_prefetch(self, key: str, object_size: int, first: int, last: int) -> None:
        if self.prefetch_blocks <= 0:
            return
        with self._lock:
            previous = self._last_block.get(key)
            self._last_block[key] = last
            if len(self._last_block) > 4096:
                self._last_block.pop(next(iter(self._last_block)))
            sequential = first == 0 if previous is None else previous <= first <= previous + 1
            frontier = self._frontier.get(key, last)
            if not sequential or frontier < last:
                frontier = last
            if not sequential:
                self._window.pop(key, None)
            window = self._window.get(key)  # blocks claimed by the last read-ahead, None: none yet
            # once the reader is inside the last window claimed, claim the next, twice as wide, in
            # one GET: two windows in flight keep the store busy while the reader catches up
            if not sequential or (window is not None and frontier - last > window):
                self._frontier[key] = frontier
                return
            size = self.prefetch_blocks if window is None else min(window * 2, self.max_window)
            self._window[key] = size
            run = self._claim(key, object_size, frontier + 1, size)
        self._submit(key, object_size, run)

    def _claim(
        self, key: str, object_size: int, first: int, count: int
    ) -> list[tuple[int, concurrent.futures.Future[memoryview]]]:
        """Mark blocks [first, first + count) that are neither cached nor in flight as in flight (the
        first contiguous run of them); call with the lock held."""
        total = (object_size + self.block_size - 1) // self.block_size
        end = min(total, first + count)
        if total - end <= count // 2:
            end = total  # no short tail left for a GET of its own, late, behind the next objects
        self._frontier[key] = max(self._frontier.get(key, -1), end - 1)
        if len(self._frontier) > 4096:
            oldest = next(iter(self._frontier))
            del self._frontier[oldest]
            self._window.pop(oldest, None)
        run: list[tuple[int, concurrent.futures.Future[memoryview]]] = []
        for n in range(first, end):
            bkey = (key, n)
            if bkey in self._blocks or bkey in self._inflight:
                if run:
                    break
                continue
            future: concurrent.futures.Future[memoryview] = concurrent.futures.Future()
            self._inflight[bkey] = future
            run.append((n, future))
        self.prefetched += len(run)
        return run

    def _submit(
        self, key: str, object_size: int, run: list[tuple[int, concurrent.futures.Future[memoryview]]]
    ) -> None:
        if not run:
            return
        try:
            self._pool.submit(self._prefetch, key, object_size, run)
        except RuntimeError:  # shut down
            with self._lock:
                for number, _ in run:
                    self._inflight.pop((key, number), None)
            for _, future in run:
                future.cancel()

    def lookahead_objects(self, object_size: int) -> int:
        """How many whole objects of this size a sequential reader may read ahead: as many as fill
        half the cache (the other half holds what it reads now), at least one."""
        return max(1, self.capacity_blocks * self.block_size // 2 // max(object_size, 1))

    def window_bytes(self, key: str) -> int:
        """The read-ahead window of ``key`` now (a sequential reader's grows up to the maximum)."""
        with self._lock:
            return self._window.get(key, self.prefetch_blocks) * self.block_size

    def prefetch(self, key: str, object_size: int, after: str = "") -> None:
        """Read ahead the first blocks of ``key``, the next object of a sequential reader of
        ``after`` (whose window it continues with); later reads from block 0 on count as sequential.
        Does nothing when already under way."""
        if self.prefetch_blocks <= 0:
            return
        with self._lock:
            if key in self._frontier or key in self._last_block:
                return
            self._last_block[key] = -1
            # the reader's next window, as if the objects were one: it keeps doubling across them
            after_window = self._window.get(after)
            window = self.prefetch_blocks if after_window is None else min(after_window * 2, self.max_window)
            self._window[key] = window
            run = self._claim(key, object_size, 0, window)
        self._submit(key, object_size, run)

    def _prefetch(
        self, key: str, object_size: int, run: list[tuple[int, concurrent.futures.Future[memoryview]]]
    ) -> None:
        self._fetch_run(key, object_size, run)
        error = run[0][1].exception()
        if error is not None:
            logger.debug("tier prefetch of %s from block %d failed: %s", key, run[0][0], error)

    def invalidate(self, key: str) -> None:
        """Forget every block of ``key`` (the object was deleted)."""
        with self._lock:
            for bkey in [k for k in self._blocks if k[0] == key]:
                del self._blocks[bkey]
            self._last_block.pop(key, None)
            self._frontier.pop(key, None)
            self._window.pop(key, None)

    def clear(self) -> None:
        """Forget every cached block and every reader's read-ahead state (in-flight GETs finish and
        are cached as usual)."""
        with self._lock:
            self._blocks.clear()
            self._last_block.clear()
            self._frontier.clear()
            self._window.clear()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            pending = list(self._inflight.values())
            self._inflight.clear()
        for future in pending:
            if not future.done():
                future.set_exception(StoreError("tier block cache closed"))
