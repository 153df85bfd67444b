"""Broker errors: each carries the RocketMQ v2 ``Code`` it maps to. The mapping to ``Status`` is here,
once; RPC handlers raise and :func:`status_of` (used by ``services.base``) translates."""

from __future__ import annotations

from mqcloud.apache.rocketmq.v2 import definition_pb2 as pb

__all__ = (
    "OK_STATUS",
    "BadRequest",
    "BodyEmpty",
    "BodyTooLarge",
    "BrokerError",
    "Forbidden",
    "GroupNotFound",
    "IllegalFilterExpression",
    "IllegalGroup",
    "IllegalInvisibleTime",
    "IllegalMessageKey",
    "IllegalMessageTag",
    "IllegalOffset",
    "IllegalPropertyKey",
    "IllegalTopic",
    "InternalError",
    "InvalidReceiptHandle",
    "NotImplementedYet",
    "PropertyConflictWithType",
    "TopicNotFound",
    "ok_status",
    "status_of",
)


class BrokerError(Exception):
    """Base of every error a client may see; ``code`` is the v2 ``Code`` value."""

    code: int = pb.Code.INTERNAL_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(BrokerError):
    code = pb.Code.BAD_REQUEST


class IllegalTopic(BrokerError):
    code = pb.Code.ILLEGAL_TOPIC


class IllegalGroup(BrokerError):
    code = pb.Code.ILLEGAL_CONSUMER_GROUP


class IllegalMessageTag(BrokerError):
    code = pb.Code.ILLEGAL_MESSAGE_TAG


class IllegalMessageKey(BrokerError):
    code = pb.Code.ILLEGAL_MESSAGE_KEY


class IllegalPropertyKey(BrokerError):
    code = pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY


class IllegalFilterExpression(BrokerError):
    code = pb.Code.ILLEGAL_FILTER_EXPRESSION


class IllegalInvisibleTime(BrokerError):
    code = pb.Code.ILLEGAL_INVISIBLE_TIME


class IllegalOffset(BrokerError):
    code = pb.Code.ILLEGAL_OFFSET


class InvalidReceiptHandle(BrokerError):
    code = pb.Code.INVALID_RECEIPT_HANDLE


class PropertyConflictWithType(BrokerError):
    code = pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


class Forbidden(BrokerError):
    code = pb.Code.FORBIDDEN


class TopicNotFound(BrokerError):
    code = pb.Code.TOPIC_NOT_FOUND


class GroupNotFound(BrokerError):
    code = pb.Code.CONSUMER_GROUP_NOT_FOUND


class BodyTooLarge(BrokerError):
    code = pb.Code.MESSAGE_BODY_TOO_LARGE


class BodyEmpty(BrokerError):
    code = pb.Code.MESSAGE_BODY_EMPTY


class NotImplementedYet(BrokerError):
    code = pb.Code.NOT_IMPLEMENTED


class InternalError(BrokerError):
    code = pb.Code.INTERNAL_ERROR


# Shared, never mutated: protobuf copies a message passed to a constructor or CopyFrom.
OK_STATUS = pb.Status(code=pb.Code.OK, message="OK")


def ok_status(message: str = "OK") -> pb.Status:
    return pb.Status(code=pb.Code.OK, message=message)


def status_of(exc: BaseException) -> pb.Status:
    """The ``Status`` a client sees for ``exc`` (unknown exceptions become INTERNAL_ERROR)."""
    if isinstance(exc, BrokerError):
        return pb.Status(code=exc.code, message=exc.message)  # type: ignore[arg-type]
    return pb.Status(code=pb.Code.INTERNAL_ERROR, message=f"internal error: {type(exc).__name__}")
