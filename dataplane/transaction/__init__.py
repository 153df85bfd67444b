"""Transactional messages: half messages, EndTransaction and check-backs (docs/transactions.md)."""

from dataplane.transaction.check import CheckSender, TransactionCheckService, find_producer, telemetry_sender
from dataplane.transaction.service import (
    CHECK_GROUP,
    HALF_TOPIC,
    OP_TOPIC,
    EndResult,
    Pending,
    TransactionalMessageService,
    TransactionError,
    to_half_message,
)

__all__ = (
    "CHECK_GROUP",
    "HALF_TOPIC",
    "OP_TOPIC",
    "CheckSender",
    "EndResult",
    "Pending",
    "TransactionCheckService",
    "TransactionError",
    "TransactionalMessageService",
    "find_producer",
    "telemetry_sender",
    "to_half_message",
)
