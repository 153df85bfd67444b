"""Uploading one sealed CommitLog segment: read by path in 1 MiB chunks, MD5 as it goes, paced by
bytes, one PUT (segment <= ``part_bytes``) or a multipart upload of ``part_bytes`` parts, verified.

Verification needs no read-back on S3: a single PUT answers the MD5 as ETag, a multipart upload
``md5(md5(part 1) + ... + md5(part n))-n``, and both are computed locally while reading. Other stores
(local directory, GCS, Azure) answer other ETags; their object is read back and hashed.

:class:`UploadWorker` runs :func:`upload_file` in a child process (``upload_worker.py``) so that
reading, hashing and the HTTP client's work never take the broker's GIL from the write path; sealed
segment files are immutable, so the child reads them by path. It answers over a pipe, one JSON line
per request::

    parent -> child (first line)  {"url": ..., "endpoint": ..., ...}       # ObjectStoreSettings
    parent -> child               {"key": ..., "path": ..., "size": ..., "part_bytes": ..., "rate": ...}
    child -> parent               {"md5": "..."}  or  {"error": "...", "kind": "verify"|"unavailable"}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import dataplane
from dataplane.store.errors import StoreError
from dataplane.store.tiered.object_store import (
    ObjectStore,
    ObjectStoreSettings,
    ObjectStoreUnavailableError,
    ObstoreBackend,
    object_md5,
)

__all__ = ("CHUNK_BYTES", "Pacer", "TierVerifyError", "UploadWorker", "upload_file")

# Reads, hashes and pacing go by 1 MiB: large enough that hashlib releases the GIL and a read costs
# one syscall, small enough that pacing at 50 MB/s sleeps every 20 ms instead of bursting.
CHUNK_BYTES = 1 << 20
# Time not spent reading (the PUT, the HEAD, a pause between segments) earns at most this much
# credit: enough that the PUT's time does not lower the average rate, small enough that a paced
# upload never starts with more than a quarter second's worth of bytes at once.
_BURST_S = 0.25
_STOP_POLL_S = 0.1


class TierVerifyError(StoreError):
    """An uploaded object's size or checksum differs from the local bytes."""

    retriable = True


class Pacer:
    """Bytes-per-second limit shared by consecutive uploads (``rate`` <= 0: unlimited)."""

    def __init__(self, rate: float = 0.0) -> None:
        self.rate = rate
        self._due = 0.0  # monotonic time by which the bytes taken so far may have gone out

    def take(self, size: int) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        self._due = max(self._due, now - _BURST_S) + size / self.rate
        if self._due > now:
            time.sleep(self._due - now)


def upload_file(objects: ObjectStore, key: str, path: Path, size: int, part_bytes: int, pacer: Pacer) -> str:
    """Upload the first ``size`` bytes of ``path`` as ``key`` and verify it; returns its MD5 (hex).

    ``part_bytes`` must be a multiple of :data:`CHUNK_BYTES` (parts then end on chunk boundaries).
    """
    whole = hashlib.md5(usedforsecurity=False)
    part_digests: list[bytes] = []
    multipart = size > part_bytes and isinstance(objects, ObstoreBackend)

    def chunks() -> Iterator[bytes]:
        part = hashlib.md5(usedforsecurity=False)
        in_part = 0
        with path.open("rb", buffering=0) as f:
            remaining = size
            while remaining:
                chunk = f.read(min(CHUNK_BYTES, remaining))
                if not chunk:
                    raise StoreError(f"{path}: expected {size} bytes, the file ended {remaining} early")
                whole.update(chunk)
                remaining -= len(chunk)
                if multipart:  # the parts' MD5s make the multipart ETag (a second pass of MD5)
                    part.update(chunk)
                    in_part += len(chunk)
                    if in_part == part_bytes or not remaining:
                        part_digests.append(part.digest())
                        part = hashlib.md5(usedforsecurity=False)
                        in_part = 0
                pacer.take(len(chunk))
                yield chunk

    if multipart:
        assert isinstance(objects, ObstoreBackend)
        objects.put_parts(key, chunks(), part_bytes)
    else:  # one PUT (a store without streaming uploads gets large objects whole, too)
        objects.put(key, b"".join(chunks()))
    md5 = whole.hexdigest()
    info = objects.head(key)
    if info.size != size:
        raise TierVerifyError(f"{key}: expected {size} bytes in the object store, found {info.size}")
    etag = info.etag.lower()
    if etag == md5:
        return md5
    if multipart:
        composite = hashlib.md5(b"".join(part_digests), usedforsecurity=False).hexdigest()
        if etag == f"{composite}-{len(part_digests)}":
            return md5
    # not an S3 ETag (local directory, GCS, Azure), or a mismatch: read the object back
    actual = object_md5(objects, key, size)
    if actual != md5:
        raise TierVerifyError(f"{key}: expected MD5 {md5}, found {actual} after upload")
    return md5


class UploadWorker:
    """A child process running :func:`upload_file`; started on demand, restarted after a failure.

    One request at a time (callers serialise; a lock guards anyway). A child that dies, hangs past
    its deadline, or is interrupted by ``stopping()`` is killed and the upload fails as unavailable.
    """

    def __init__(self, settings: ObjectStoreSettings) -> None:
        self.settings = settings
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.started = 0  # children started so far (a restart after a failure counts)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        with self._lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        root = str(Path(dataplane.__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataplane.store.tiered.upload_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert proc.stdin is not None
        # the settings (credentials included) go through the pipe, never argv or the environment
        proc.stdin.write(json.dumps(dataclasses.asdict(self.settings)).encode() + b"\n")
        proc.stdin.flush()
        self._proc = proc
        self.started += 1
        return proc

    def upload(
        self,
        key: str,
        path: Path,
        size: int,
        part_bytes: int,
        rate: float,
        stopping: Callable[[], bool] = lambda: False,
    ) -> str:
        """Upload and verify in the child; returns the MD5. Raises like :func:`upload_file`."""
        request = {"key": key, "path": str(path), "size": size, "part_bytes": part_bytes, "rate": rate}
        settings = self.settings
        parts = size // part_bytes + 1
        deadline = time.monotonic() + settings.timeout_s * (settings.max_retries + 1) * (parts + 2)
        if rate > 0:
            deadline += size / rate
        with self._lock:
            try:
                proc = self._ensure()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                line = _read_line(proc.stdout, deadline, stopping)
            except (OSError, ValueError, TimeoutError, InterruptedError) as exc:
                self._kill()
                raise ObjectStoreUnavailableError(f"object store: {key!r}: upload worker: {exc}") from exc
            if not line:
                self._kill()
                raise ObjectStoreUnavailableError(f"object store: {key!r}: upload worker exited")
            try:
                answer = json.loads(line)
            except ValueError as exc:
                self._kill()
                raise ObjectStoreUnavailableError(f"object store: {key!r}: upload worker: {exc}") from exc
        if "md5" in answer:
            return str(answer["md5"])
        error = str(answer.get("error", "unknown error"))
        if answer.get("kind") == "verify":
            raise TierVerifyError(error)
        raise ObjectStoreUnavailableError(error)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        _close_pipes(proc)

    def close(self) -> None:
        """Stop the child (it exits when its input ends; killed if it does not within 5 s)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None:
                return
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _close_pipes(proc)


def _read_line(stream: IO[bytes], deadline: float, stopping: Callable[[], bool]) -> bytes:
    while True:
        if stopping():
            raise InterruptedError("stopped while uploading")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer before the deadline")
        ready, _, _ = select.select([stream], [], [], min(left, _STOP_POLL_S))
        if ready:
            return stream.readline()


def _close_pipes(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
