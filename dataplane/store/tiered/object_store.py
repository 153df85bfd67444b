"""One object-store interface over ``obstore``: a local directory, S3-compatible stores, GCS, Azure.

Configured by URL: ``file:///var/lib/mq/tier`` (the embedded default), ``s3://bucket/prefix`` (with
endpoint, region and credentials for MinIO, Ceph, moto or AWS), ``gs://bucket/prefix``,
``az://container/prefix``. Every key is relative to the URL's prefix. Puts are atomic (readers see
the whole old or the whole new object); reads are ranged GETs.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import obstore
import obstore.exceptions
from obstore.store import from_url

from dataplane.store.errors import StoreError

__all__ = (
    "ObjectInfo",
    "ObjectMissingError",
    "ObjectStore",
    "ObjectStoreSettings",
    "ObjectStoreUnavailableError",
    "ObstoreBackend",
    "object_md5",
    "open_object_store",
)

logger = logging.getLogger(__name__)

# Objects up to this size go up in one PUT, so S3 answers with the MD5 as ETag and the upload is
# verified without reading it back; larger ones use multipart uploads and are read back.
SINGLE_PUT_MAX_BYTES = 64 << 20
_READBACK_BLOCK = 8 << 20


class ObjectStoreUnavailableError(StoreError):
    """The object store could not be reached or refused the request; the caller retries later."""

    retriable = True


class ObjectMissingError(StoreError):
    """The object does not exist (deleted by tiered retention, or never written)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectInfo:
    """Size and ETag of one stored object (ETag is the MD5 for single-part S3 uploads)."""

    size: int
    etag: str


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectStoreSettings:
    """Where the tier lives: a URL plus what S3-compatible stores need besides it."""

    url: str
    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""
    # Bounded request time: an unreachable store fails a request instead of hanging the offloader.
    timeout_s: float = 30.0
    max_retries: int = 2


class ObjectStore(Protocol):
    """What the tier needs from an object store; keys are ``/``-separated, relative to the prefix."""

    url: str

    def put(self, key: str, data: bytes | memoryview | Path) -> ObjectInfo: ...

    def head(self, key: str) -> ObjectInfo: ...

    def get_range(self, key: str, start: int, length: int) -> bytes | memoryview: ...

    def get(self, key: str) -> bytes: ...

    def delete(self, key: str) -> None: ...

    def list(self, prefix: str) -> list[str]: ...


def _wrap(key: str, exc: Exception) -> StoreError:
    if isinstance(exc, FileNotFoundError | obstore.exceptions.NotFoundError):
        return ObjectMissingError(f"object {key!r} not found")
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ObjectStoreUnavailableError(f"object store: {key!r}: {first_line}")


class ObstoreBackend:
    """:class:`ObjectStore` on ``obstore`` (Rust ``object_store``): it releases the GIL during I/O."""

    def __init__(self, settings: ObjectStoreSettings) -> None:
        self.url = settings.url
        kwargs: dict[str, Any] = {}
        if settings.url.startswith("file://"):
            Path(settings.url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
            self._store = from_url(settings.url, mkdir=True)
            return
        timeout = datetime.timedelta(seconds=settings.timeout_s)
        client: dict[str, Any] = {"timeout": timeout, "connect_timeout": min(timeout, _CONNECT_TIMEOUT)}
        if settings.url.startswith(("s3://", "s3a://")):
            # GCS and Azure take their credentials from the environment (GOOGLE_*, AZURE_*)
            if settings.endpoint:
                kwargs["endpoint"] = settings.endpoint
                client["allow_http"] = settings.endpoint.startswith("http://")
            if settings.region:
                kwargs["region"] = settings.region
            if settings.access_key_id:
                kwargs["access_key_id"] = settings.access_key_id
                kwargs["secret_access_key"] = settings.secret_access_key
        retry: Any = {
            "max_retries": settings.max_retries,
            "retry_timeout": timeout,
            "backoff": {
                "init_backoff": datetime.timedelta(milliseconds=100),
                "max_backoff": datetime.timedelta(seconds=2),
                "base": 2,
            },
        }
        try:
            self._store = _from_url(settings.url, client_options=client, retry_config=retry, **kwargs)
        except (ValueError, obstore.exceptions.BaseError) as exc:
            raise StoreError(f"tier url {settings.url!r}: {exc}") from exc

    def put(self, key: str, data: bytes | memoryview | Path) -> ObjectInfo:
        size = data.stat().st_size if isinstance(data, Path) else memoryview(data).nbytes
        try:
            result = obstore.put(self._store, key, data, use_multipart=size > SINGLE_PUT_MAX_BYTES)
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(key, exc) from exc
        return ObjectInfo(size, (result.get("e_tag") or "").strip('"'))

    def put_parts(self, key: str, chunks: Iterator[bytes], part_bytes: int) -> ObjectInfo:
        """A multipart upload of ``chunks`` in parts of exactly ``part_bytes`` (the last may be
        shorter), two parts in flight; the object appears whole or not at all."""
        size = 0

        def counted() -> Iterator[bytes]:
            nonlocal size
            for chunk in chunks:
                size += len(chunk)
                yield chunk

        try:
            result = obstore.put(self._store, key, counted(), chunk_size=part_bytes, max_concurrency=2)
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(key, exc) from exc
        return ObjectInfo(size, (result.get("e_tag") or "").strip('"'))

    def head(self, key: str) -> ObjectInfo:
        try:
            meta = obstore.head(self._store, key)
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(key, exc) from exc
        return ObjectInfo(int(meta["size"]), (meta.get("e_tag") or "").strip('"'))

    def get_range(self, key: str, start: int, length: int) -> bytes | memoryview:
        try:
            # a view of the client's own buffer: a copy of a 16 MiB window into fresh pages costs
            # page faults with the GIL held, on every cold read
            return memoryview(obstore.get_range(self._store, key, start=start, length=length))
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(key, exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(key, exc) from exc

    def delete(self, key: str) -> None:
        try:
            obstore.delete(self._store, key)
        except (OSError, obstore.exceptions.BaseError) as exc:
            err = _wrap(key, exc)
            if not isinstance(err, ObjectMissingError):
                raise err from exc

    def list(self, prefix: str) -> list[str]:
        try:
            return [meta["path"] for chunk in obstore.list(self._store, prefix) for meta in chunk]
        except (OSError, obstore.exceptions.BaseError) as exc:
            raise _wrap(prefix, exc) from exc


_CONNECT_TIMEOUT = datetime.timedelta(seconds=5)
# the typed overloads of from_url are per scheme; the keyword set here is chosen per scheme above
_from_url: Any = from_url


def object_md5(store: ObjectStore, key: str, size: int) -> str:
    """MD5 of a stored object, read back in blocks (for stores whose ETag is not an MD5)."""
    digest = hashlib.md5(usedforsecurity=False)
    for start in range(0, size, _READBACK_BLOCK):
        digest.update(store.get_range(key, start, min(_READBACK_BLOCK, size - start)))
    return digest.hexdigest()


def open_object_store(settings: ObjectStoreSettings) -> ObjectStore:
    """The backend for ``settings.url`` (every scheme goes through obstore)."""
    return ObstoreBackend(settings)
