"""An ordered list of equally sized, contiguous MappedFiles forming one logical byte stream.

Layout: a directory of files named by the 20-digit offset of their first byte; file ``n + 1`` starts
where file ``n`` ends (``file_size`` apart). Only whole files are deleted, from the front.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from dataplane.store.errors import StoreError
from dataplane.store.mapped_file import MappedFile, segment_name

__all__ = ("MappedFileQueue",)

logger = logging.getLogger(__name__)


class MappedFileQueue:
    """Contiguous segments of one stream; O(1) lookup of the segment holding an offset.

    Guarantees: segments are contiguous and equally sized; ``min_offset`` is the first byte of the
    oldest segment; deletion only removes whole segments from the front and never the last one.
    """

    def __init__(
        self, directory: Path, file_size: int, *, preallocate: bool = True, writable_map: bool = False
    ):
        self.directory = directory
        self.file_size = file_size
        self._preallocate = preallocate
        self._writable_map = writable_map
        self.files: list[MappedFile] = []
        self.lock = threading.RLock()

    def load(self) -> None:
        """Open every segment in the directory (all positions marked fully written)."""
        if not self.directory.is_dir():
            return
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        expected: int | None = None
        for path in names:
            start = int(path.name)
            if expected is not None and start != expected:
                raise StoreError(f"{self.directory}: expected a segment at {expected}, found {path.name}")
            if start % self.file_size:
                raise StoreError(f"{path}: offset {start} is not a multiple of file size {self.file_size}")
            mf = MappedFile(
                path, self.file_size, preallocate=self._preallocate, writable_map=self._writable_map
            )
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)
            expected = start + self.file_size

    @property
    def min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else 0

    @property
    def max_offset(self) -> int:
        files = self.files
        return files[-1].max_offset if files else 0

    @property
    def flushed_offset(self) -> int:
        for mf in reversed(self.files):
            if mf.flushed_position:
                return mf.file_from_offset + mf.flushed_position
        return self.min_offset

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def create(self, start: int) -> MappedFile:
        with self.lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            last = self.last()
            if last is not None and start != last.file_from_offset + self.file_size:
                raise StoreError(
                    f"{self.directory}: expected next segment at {last.max_offset}, asked {start}"
                )
            mf = MappedFile(
                self.directory / segment_name(start),
                self.file_size,
                preallocate=self._preallocate,
                writable_map=self._writable_map,
            )
            self.files.append(mf)
            return mf

    def last_writable(self, start_if_empty: int = 0) -> MappedFile:
        """The segment appends go to, creating the first or the next one when needed."""
        last = self.last()
        if last is None:
            return self.create(start_if_empty - start_if_empty % self.file_size)
        if last.is_full:
            return self.create(last.file_from_offset + self.file_size)
        return last

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding ``offset``, or None when it was deleted or never written."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if index < 0 or index >= len(files):
            return None
        mf = files[index]
        # the list may have lost its head concurrently (retention): re-check the bounds
        if not mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
            return None
        return mf

    def flush(self) -> int:
        """fsync every segment with unflushed bytes; returns the flushed offset."""
        for mf in list(self.files):
            if mf.flushed_position < mf.wrote_position and not mf.closed:
                mf.flush()
        return self.flushed_offset

    def truncate(self, offset: int) -> None:
        """Drop every byte at and after ``offset``: later segments are deleted, the tail is zeroed."""
        with self.lock:
            while self.files and self.files[-1].file_from_offset >= offset:
                mf = self.files.pop()
                if mf.file_from_offset == offset and not self.files:
                    # keep an empty segment so the stream still starts at `offset`
                    mf.zero_from(0)
                    self.files.append(mf)
                    return
                mf.destroy()
            mf_last = self.last()
            if mf_last is not None and offset < mf_last.file_from_offset + self.file_size:
                mf_last.zero_from(offset - mf_last.file_from_offset)
                mf_last.wrote_position = offset - mf_last.file_from_offset

    def set_positions(self, offset: int) -> None:
        """After recovery: everything before ``offset`` is written and durable."""
        for mf in self.files:
            rel = min(max(offset - mf.file_from_offset, 0), self.file_size)
            mf.wrote_position = mf.flushed_position = rel

    def delete_first(self) -> MappedFile | None:
        """Delete the oldest segment unless it is the last one; returns it."""
        with self.lock:
            if len(self.files) <= 1:
                return None
            mf = self.files.pop(0)
        mf.destroy()
        return mf

    def destroy(self) -> None:
        with self.lock:
            for mf in self.files:
                mf.destroy()
            self.files.clear()
            try:
                self.directory.rmdir()
            except OSError:
                logger.debug("could not remove %s", self.directory)

    def close(self) -> None:
        with self.lock:
            for mf in self.files:
                mf.close()
            self.files.clear()
