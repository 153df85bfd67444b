"""Receipt handles: opaque, unforgeable references to one in-flight delivery.

Layout before signing (``|``-separated): version, queue id, queue offset, delivery nonce (hex),
invisible-until (ms), group, topic. The handle is ``base64url(payload) + "." + base64url(tag)``, where
the version in the payload names the 16-byte tag:

- ``2`` (issued now): keyed BLAKE2b, ``blake2b(payload, key=secret, digest_size=16)``. A handle is
  signed on every delivery and verified on every ack; HMAC-SHA256 costs ~2 us each way in CPython
  here, keyed BLAKE2b ~0.5 us (it is a MAC by design, no HMAC construction around it).
- ``1`` (issued by earlier brokers): ``HMAC-SHA256(secret, payload)[:16]``. Still verified, so the
  handles in flight when a broker is upgraded can be acked. Upgraded brokers issue it too while
  ``receipt_handle_version = 1`` (a rolling upgrade: nodes not yet upgraded verify only version 1).

The version is inside the signed payload, so a tag is only ever checked with the algorithm its own
version names: a v1 tag never verifies a v2 payload, nor the other way round.

Version-2 handles are issued and verified by the compiled codec (``dataplane/_v2_codec.c``, ~1.5 us
each way against ~4 and ~9 us here); it hands anything else (v1 handles, forged or malformed text)
to the Python code below, which is its reference and says why a handle is refused.

The signature makes handles unforgeable; the nonce makes them single-use: the broker keeps the
current nonce per in-flight message, and ChangeInvisibleDuration or an ack retires it, so an older
handle is refused (INVALID_RECEIPT_HANDLE). The secret lives in ``{data_dir}/receipt.secret``.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import NamedTuple

from dataplane.errors import InvalidReceiptHandle

__all__ = ("ReceiptCodec", "ReceiptHandle", "load_or_create_secret")

_VERSIONS = ("1", "2")  # verified; the codec issues the one it was built with (2 unless told)
_MAX_HANDLE = 2048
_TAG = 16


class ReceiptHandle(NamedTuple):
    """The fields of a verified handle (a NamedTuple: the compiled decoder builds it directly)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    nonce: str
    invisible_until_ms: int


try:  # the compiled codec (dataplane/_v2_codec.c); the same handles as the Python code below
    from dataplane import _v2_codec  # type: ignore[attr-defined]

    _compiled_decode, _compiled_encode = _v2_codec.receipt_decode, _v2_codec.receipt_encode
except ImportError:  # pragma: no cover - no compiler where the broker was built
    _compiled_decode = _compiled_encode = None

_TO_URL = bytes.maketrans(b"+/", b"-_")
_FROM_URL = bytes.maketrans(b"-_", b"+/")


def _b64(data: bytes) -> str:
    """base64url without padding (``base64.urlsafe_b64encode`` minus its per-call overhead)."""
    return binascii.b2a_base64(data, newline=False).rstrip(b"=").translate(_TO_URL).decode()


def _unb64(text: str) -> bytes:
    """Inverse of :func:`_b64`, as lenient as ``base64.urlsafe_b64decode`` (raises ValueError)."""
    return binascii.a2b_base64((text + "=" * (-len(text) % 4)).encode("ascii").translate(_FROM_URL))


class ReceiptCodec:
    """Encodes and verifies receipt handles with one broker secret."""

    def __init__(self, secret: bytes, issue_version: int = 2) -> None:
        """``issue_version`` 1 only while brokers that verify nothing newer still take acks (a
        rolling upgrade: ``receipt_handle_version`` in the broker settings); both are verified."""
        if len(secret) < 16:
            raise ValueError("receipt secret must be at least 16 bytes")
        if str(issue_version) not in _VERSIONS:
            raise ValueError(f"receipt handle version must be one of {', '.join(_VERSIONS)}")
        self._version = str(issue_version)
        self._compiled_encode = _compiled_encode if self._version == "2" else None
        self._secret = secret
        # BLAKE2b takes keys of up to 64 bytes; a longer secret is hashed down to one
        key = secret if len(secret) <= 64 else hashlib.blake2b(secret).digest()
        self._mac = hashlib.blake2b(key=key, digest_size=_TAG)  # copied per use: the key is set up once

    @property
    def mac(self) -> object:
        """The keyed BLAKE2b of version-2 tags, for compiled code that verifies handles itself
        (``_v2_codec.ack_checked``); it copies it per use, as :meth:`_sign` does."""
        return self._mac

    def _sign(self, payload: bytes) -> bytes:
        """The tag of ``payload``, by the algorithm its version names (see the module docstring)."""
        if payload[:2] == b"1|":
            return hmac.digest(self._secret, payload, "sha256")[:_TAG]
        mac = self._mac.copy()
        mac.update(payload)
        return mac.digest()

    def encode(self, handle: ReceiptHandle) -> str:
        h = handle
        return self.encode_parts(h.group, h.topic, h.queue_id, h.offset, h.nonce, h.invisible_until_ms)

    def encode_parts(
        self, group: str, topic: str, queue_id: int, offset: int, nonce: str, invisible_until_ms: int
    ) -> str:
        """:meth:`encode` of the handle with these fields, without building it (the receive path)."""
        if self._compiled_encode is not None:
            text: str = self._compiled_encode(
                self._mac, group, topic, queue_id, offset, nonce, invisible_until_ms
            )
            return text
        return self._encode_parts_py(group, topic, queue_id, offset, nonce, invisible_until_ms)

    def _encode_parts_py(
        self, group: str, topic: str, queue_id: int, offset: int, nonce: str, invisible_until_ms: int
    ) -> str:
        until = int(invisible_until_ms)
        data = f"{self._version}|{int(queue_id)}|{int(offset)}|{nonce}|{until}|{group}|{topic}".encode()
        return f"{_b64(data)}.{_b64(self._sign(data))}"

    def decode(self, text: str) -> ReceiptHandle:
        """Verify and parse; raises InvalidReceiptHandle on anything malformed or forged."""
        if _compiled_decode is not None:
            handle: ReceiptHandle | None = _compiled_decode(self._mac, text, ReceiptHandle)
            if handle is not None:
                return handle
        # v1 handles, and anything the compiled decoder did not take: verified (or refused) here
        return self._decode_py(text)

    def _decode_py(self, text: str) -> ReceiptHandle:
        if not text or len(text) > _MAX_HANDLE or text.count(".") != 1:
            raise InvalidReceiptHandle("malformed receipt handle")
        body, sig = text.split(".")
        try:
            payload = _unb64(body)
            signature = _unb64(sig)
        except (ValueError, TypeError) as exc:
            raise InvalidReceiptHandle("malformed receipt handle") from exc
        if not hmac.compare_digest(signature, self._sign(payload)):
            raise InvalidReceiptHandle("receipt handle signature mismatch")
        try:
            version, qid, offset, nonce, until, group, topic = payload.decode().split("|", 6)
            if version not in _VERSIONS:
                raise ValueError(version)
            return ReceiptHandle(group, topic, int(qid), int(offset), nonce, int(until))
        except ValueError as exc:
            raise InvalidReceiptHandle("malformed receipt handle") from exc


def load_or_create_secret(data_dir: Path) -> bytes:
    path = data_dir / "receipt.secret"
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.hex())
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return secret
