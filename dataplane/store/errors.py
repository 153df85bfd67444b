"""Errors raised by the storage engine.

Every error derives from :class:`StoreError`. Class attributes describe behaviour so callers branch on
``retriable`` / ``fatal`` rather than on type lists (the aiokafka ``KafkaError`` idiom).
"""

from __future__ import annotations

__all__ = (
    "BodyCrcError",
    "CorruptRecordError",
    "InvalidTopicError",
    "OffsetMovedError",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
)


class StoreError(Exception):
    """Base class of every storage-engine error."""

    retriable: bool = False
    fatal: bool = False


class CorruptRecordError(StoreError):
    """Bytes on disk (or handed to a decoder) do not form a valid record.

    The message always names what was expected and what was found, and where.
    """


class BodyCrcError(CorruptRecordError):
    """A well-framed record whose body fails its CRC; ``request`` describes the record's place.

    Recovery keeps such a record's place (queue offsets stay consecutive) and marks it unreadable
    instead of truncating the valid records after it.
    """

    def __init__(self, message: str, request: object) -> None:
        super().__init__(message)
        self.request = request


class InvalidTopicError(StoreError, ValueError):
    """A topic name cannot be stored (empty, too long, contains ``/``, ``..`` or NUL)."""


class OffsetMovedError(StoreError):
    """The requested offset was deleted by retention; ``min_offset`` is the new first valid offset."""

    def __init__(self, message: str, min_offset: int) -> None:
        super().__init__(message)
        self.min_offset = min_offset


class StoreClosedError(StoreError):
    """The store is not running (never started, or shut down)."""


class StoreLockedError(StoreError):
    """Another process holds the store directory lock."""

    fatal = True
