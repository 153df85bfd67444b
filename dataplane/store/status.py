"""Outcome codes of the put and get paths (RocketMQ's ``PutMessageStatus`` / ``GetMessageStatus``)."""

from __future__ import annotations

import enum

__all__ = ("GetMessageStatus", "PutMessageStatus")


class PutMessageStatus(enum.StrEnum):
    """Result of :meth:`MessageStore.put_messages`; only ``PUT_OK`` means durable under SYNC_FLUSH."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    # The store's disk is full (watermark or ENOSPC); nothing of the batch was kept.
    DISK_FULL = "DISK_FULL"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    # HA (dataplane/ha): too few in-sync replicas to start, or they did not confirm in time.
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"


class GetMessageStatus(enum.StrEnum):
    """Result of :meth:`MessageStore.get_messages`, with RocketMQ's meaning for each member."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
