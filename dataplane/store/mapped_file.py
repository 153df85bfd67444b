"""One fixed-size storage file: written with ``os.pwrite``, read through a read-only ``mmap``.

Layout: whatever the owner writes; a new file is ``size`` bytes, preallocated and zero-filled
(``posix_fallocate``) or sparse (``ftruncate``), so any byte never written reads as 0.
Files are named by the 20-digit zero-padded offset of their first byte in the owning queue.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from dataplane.store.errors import StoreError

__all__ = ("MappedFile", "segment_name")

logger = logging.getLogger(__name__)

# The kernel's unit of copying into the page cache (write_head_last).
_PAGE = mmap.PAGESIZE
# Buffers one pwritev takes (Linux UIO_MAXIOV).
_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


class MappedFile:
    """A segment of ``file_size`` bytes starting at logical offset ``file_from_offset``.

    Guarantees: every byte in ``[0, wrote_position)`` was handed to the kernel; every byte in
    ``[0, flushed_position)`` was fsynced. Readers get copies (``bytes``), never views that would pin
    the mapping, so :meth:`close` always succeeds.
    """

    def __init__(
        self,
        path: Path,
        file_size: int,
        *,
        preallocate: bool = True,
        writable_map: bool = False,
        random_access: bool = False,
    ):
        self.path = path
        self.file_size = file_size
        try:
            self.file_from_offset = int(path.name)
        except ValueError as exc:
            raise StoreError(f"segment name: expected 20 digits, found {path.name!r}") from exc
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            current = os.fstat(self._fd).st_size
            if current < file_size:
                if preallocate:
                    try:
                        os.posix_fallocate(self._fd, 0, file_size)
                    except OSError:
                        os.ftruncate(self._fd, file_size)
                else:
                    os.ftruncate(self._fd, file_size)
            elif current > file_size:
                raise StoreError(f"{path}: expected {file_size} bytes, found {current}")
            access = mmap.ACCESS_WRITE if writable_map else mmap.ACCESS_READ
            self.mm = mmap.mmap(self._fd, file_size, access=access)
            if random_access or (writable_map and current == 0):
                # No read-around on a fault: in a new file there is nothing to read, and the kernel
                # would zero-fill read_ahead_kb of page cache around the first written page (8 MiB
                # on this VM's disk) under the put lock, per new ConsumeQueue file; an IndexFile's
                # hash slots are random by design.
                self.mm.madvise(mmap.MADV_RANDOM)
        except BaseException:
            os.close(self._fd)
            raise
        self.wrote_position = 0
        self.flushed_position = 0
        self.closed = False

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def max_offset(self) -> int:
        """Logical offset just past the last byte written."""
        return self.file_from_offset + self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``position`` (relative), retrying short writes."""
        written = os.pwrite(self._fd, data, position)  # the usual case: all of it at once
        if written == len(data):
            return
        view = memoryview(data)[written:]
        position += written
        while view:
            written = os.pwrite(self._fd, view, position)
            view = view[written:]
            position += written
        view.release()

    def write_pieces(self, position: int, pieces: list[bytes | bytearray | memoryview], size: int) -> None:
        """Write ``pieces`` (``size`` bytes in all) back to back at ``position``: one ``pwritev`` per
        IOV_MAX pieces, so the kernel copies them straight from the caller's buffers."""
        fd = self._fd
        for at in range(0, len(pieces), _IOV_MAX):
            chunk = pieces[at : at + _IOV_MAX]
            written = os.pwritev(fd, chunk, position)
            expected = size if len(pieces) <= _IOV_MAX else sum(map(len, chunk))
            if written != expected:  # short write: finish it the slow way
                self.write(position + written, b"".join(chunk)[written:])
            position += expected

    def write_head_last(self, position: int, pieces: list[bytes | bytearray | memoryview], size: int) -> None:
        """Write ``pieces`` (``size`` bytes in all) at ``position``, their first 4 bytes last: a
        CommitLog run's first TOTALSIZE, so until the whole run is written recovery reads a zero
        there and stops (one pwrite for the rest when the compiled encoder gave one buffer).

        One buffer within one page (a single small message) is written by one pwrite, head included:
        the kernel copies a page whole or not at all (a fatal signal is only acted on between pages),
        so no crash leaves its TOTALSIZE without the rest, and a send saves a system call."""
        first = memoryview(pieces[0])
        if len(pieces) == 1 and position % _PAGE + size <= _PAGE:
            if os.pwrite(self._fd, first, position) == size:
                return
            os.pwrite(self._fd, bytes(4), position)  # a short write (never seen): the head-last way
        if len(pieces) == 1:
            self.write(position + 4, first[4:])
        else:
            pieces[0] = first[4:]
            self.write_pieces(position + 4, pieces, size - 4)
        self.write(position, first[:4])

    def read(self, position: int, size: int) -> bytes:
        """Copy of ``size`` bytes at ``position``; raises ValueError once closed."""
        return self.mm[position : position + size]

    def flush(self) -> int:
        """fsync everything written so far; returns the new flushed position."""
        target = self.wrote_position
        if target > self.flushed_position:
            os.fdatasync(self._fd)
            self.flushed_position = target
        return self.flushed_position

    def msync(self) -> None:
        """Make what was written to the file durable (index files: entries and slot pages written
        with pwrite).

        fdatasync rather than ``mmap.flush()``: CPython holds the GIL through msync, and on Linux
        fdatasync writes back pages dirtied through a shared mapping as well, with the GIL released."""
        os.fdatasync(self._fd)

    def zero_from(self, position: int) -> None:
        """Make ``[position, file_size)`` read as zeros again (truncate then re-extend)."""
        self.mm.flush()
        os.ftruncate(self._fd, position)
        os.ftruncate(self._fd, self.file_size)
        self.wrote_position = min(self.wrote_position, position)
        self.flushed_position = min(self.flushed_position, position)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.mm.close()
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            logger.warning("segment %s already gone", self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
