"""Value types of the store's public API: what goes in (MessageToStore) and what comes out."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from dataplane.store.status import GetMessageStatus, PutMessageStatus

__all__ = (
    "PROPERTY_KEYS",
    "PROPERTY_TAGS",
    "PROPERTY_UNIQ_KEY",
    "AppendEntry",
    "GetResult",
    "MessageToStore",
    "PutResult",
    "StoredMessage",
)

# RocketMQ's property names.
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"


@dataclasses.dataclass(slots=True)
class MessageToStore:
    """One message handed to :meth:`MessageStore.put_messages`.

    Tag in property ``TAGS``, keys in ``KEYS`` (space-separated), the client's id in ``UNIQ_KEY``.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


class AppendEntry(NamedTuple):
    """Where one message landed: offsets, store time, size and the offset message id.

    ``msg_id`` is built when asked for (from the store host's hex prefix, shared by every entry):
    formatting it for every appended message cost about a tenth of an append.
    """

    physical_offset: int
    queue_offset: int
    store_timestamp: int
    size: int
    msg_id_prefix: str

    @property
    def msg_id(self) -> str:
        """Offset message id: hex of store host IPv4, port and physical offset (RocketMQ's msgId)."""
        return f"{self.msg_id_prefix}{self.physical_offset:016X}"


class PutResult(NamedTuple):
    """Outcome of one put; ``entries`` has one item per message, in order (empty unless appended)."""

    status: PutMessageStatus
    entries: list[AppendEntry]

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


class StoredMessage(NamedTuple):
    """A record read back from the CommitLog, every field decoded."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    body: bytes
    properties: dict[str, str]
    store_timestamp: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int
    sys_flag: int
    flag: int
    prepared_transaction_offset: int
    size: int
    body_crc: int

    @property
    def msg_id(self) -> str:
        """Offset message id: hex of store host IPv4, port and physical offset (RocketMQ's msgId)."""
        ip, port = self.store_host
        host = "".join(f"{int(part):02X}" for part in ip.split("."))
        return f"{host}{port:08X}{self.physical_offset:016X}"

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS)
        return raw.split() if raw else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)


class GetResult(NamedTuple):
    """Outcome of :meth:`MessageStore.get_messages` (RocketMQ ``GetMessageResult``).

    ``next_begin_offset`` is where the next pull should start; ``min_offset``/``max_offset`` bound the
    queue (max is the next offset to be written).
    """

    status: GetMessageStatus
    messages: list[StoredMessage]
    next_begin_offset: int
    min_offset: int
    max_offset: int
