"""Recall handles: signed references to one pending delay message.

``base64url("1|topic|message id|deliver ms|commitlog offset") + "." + base64url(HMAC-SHA256[:16])``,
``topic`` being the qualified real topic and the offset the one of the timer-topic record.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac

__all__ = ("InvalidRecallHandle", "RecallCodec", "RecallHandle")

_VERSION = "1"


class InvalidRecallHandle(ValueError):
    """A handle that is malformed or not signed by this broker."""


@dataclasses.dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    message_id: str
    deliver_ms: int
    cl_offset: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RecallCodec:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("recall secret must be at least 16 bytes")
        # Keyed once: a copy per handle skips the key schedule (a delay send signs every message).
        self._keyed = hmac.new(secret, b"recall|", hashlib.sha256)

    def _sign(self, payload: bytes) -> bytes:
        mac = self._keyed.copy()
        mac.update(payload)
        return mac.digest()[:16]

    def encode(self, handle: RecallHandle) -> str:
        return self.encode_fields(handle.topic, handle.message_id, handle.deliver_ms, handle.cl_offset)

    def encode_fields(self, topic: str, message_id: str, deliver_ms: int, cl_offset: int) -> str:
        """:meth:`encode` of ``RecallHandle(topic, message_id, deliver_ms, cl_offset)``."""
        payload = f"{_VERSION}|{topic}|{message_id}|{deliver_ms}|{cl_offset}".encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def decode(self, text: str) -> RecallHandle:
        if not text or len(text) > 2048:
            raise InvalidRecallHandle("empty or oversized recall handle")
        try:
            body, _, sig = text.partition(".")
            payload = _unb64(body)
            if not hmac.compare_digest(_unb64(sig), self._sign(payload)):
                raise InvalidRecallHandle("recall handle signature mismatch")
            version, topic, message_id, deliver, offset = payload.decode().split("|")
            if version != _VERSION:
                raise InvalidRecallHandle(f"recall handle version {version!r}")
            return RecallHandle(topic, message_id, int(deliver), int(offset))
        except (ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, InvalidRecallHandle):
                raise
            raise InvalidRecallHandle("malformed recall handle") from exc
