"""The storage engine: CommitLog, ConsumeQueue, IndexFile, flush, recovery, retention, offsets.

Standard library only. Start at :class:`MessageStore`; formats are in ``docs/store-format.md``.
"""

from dataplane.store.config import FlushDiskType, MessageStoreConfig
from dataplane.store.consumer_offsets import ConsumerOffsetManager
from dataplane.store.errors import (
    CorruptRecordError,
    InvalidTopicError,
    OffsetMovedError,
    StoreClosedError,
    StoreError,
    StoreLockedError,
)
from dataplane.store.message import AppendEntry, GetResult, MessageToStore, PutResult, StoredMessage
from dataplane.store.message_store import MessageStore
from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = (
    "AppendEntry",
    "ConsumerOffsetManager",
    "CorruptRecordError",
    "FlushDiskType",
    "GetMessageStatus",
    "GetResult",
    "InvalidTopicError",
    "MessageStore",
    "MessageStoreConfig",
    "MessageToStore",
    "OffsetMovedError",
    "PutMessageStatus",
    "PutResult",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
    "StoredMessage",
)
