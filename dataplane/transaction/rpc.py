"""EndTransaction: the v2 request onto :class:`TransactionalMessageService`."""

from __future__ import annotations

import logging
from typing import Any

from dataplane.errors import OK_STATUS, BadRequest, BrokerError, InternalError, NotImplementedYet
from dataplane.names import resolve
from dataplane.transaction.service import TransactionError
from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb
from mqcloud.apache.rocketmq.v2 import service_pb2 as svc

__all__ = ("InvalidTransactionId", "end_transaction")

logger = logging.getLogger(__name__)


class InvalidTransactionId(BrokerError):
    code = pb.Code.INVALID_TRANSACTION_ID


async def end_transaction(
    broker: Any, request: svc.EndTransactionRequest, header_ns: str
) -> svc.EndTransactionResponse:
    """COMMIT or ROLLBACK a half message. A repeat of the same resolution is OK (idempotent)."""
    transactions = broker.transactions
    if transactions is None:
        raise NotImplementedYet("transactional messages need the commitlog store engine")
    resolution = request.resolution
    if resolution not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
        raise BadRequest("resolution must be COMMIT or ROLLBACK")
    if not request.transaction_id:
        raise InvalidTransactionId("transaction_id is required")
    _, topic = resolve(request.topic, header_ns)
    commit = resolution == pb.TransactionResolution.COMMIT
    try:
        await transactions.end(topic, request.message_id, request.transaction_id, commit)
    except TransactionError as exc:
        raise InvalidTransactionId(str(exc)) from exc
    except RuntimeError as exc:
        raise InternalError(str(exc)) from exc
    broker.tracer.record(
        request.message_id,
        topic,
        "stored",
        detail="transaction committed: visible now" if commit else "transaction rolled back: discarded",
    )
    if request.source == pb.TransactionSource.SOURCE_SERVER_CHECK:
        logger.info(
            "transaction %s resolved by check-back: %s",
            request.message_id,
            "COMMIT" if commit else "ROLLBACK",
        )
    return svc.EndTransactionResponse(status=OK_STATUS)
