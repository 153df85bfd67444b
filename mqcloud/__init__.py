"""mqcloud: the Python SDK for MQCloud (RocketMQ 5 gRPC protocol).

See docs/sdk.md. Blocking clients: :class:`Producer`, :class:`SimpleConsumer`, :class:`PushConsumer`;
asyncio clients: :class:`AsyncProducer`, :class:`AsyncSimpleConsumer`, :class:`AsyncPushConsumer`.
"""

from mqcloud.backoff import RetryBackoff
from mqcloud.batching import BatchingOptions
from mqcloud.config import ClientConfig, Credentials
from mqcloud.errors import (
    BadRequestError,
    ClientClosedError,
    ForbiddenError,
    HeaderTooLargeError,
    IllegalStateError,
    InternalError,
    MQClientError,
    NotFoundError,
    PayloadEmptyError,
    PayloadTooLargeError,
    PaymentRequiredError,
    ProxyTimeoutError,
    RequestTimeoutError,
    TooManyRequestsError,
    TransportError,
    UnauthorizedError,
    UnsupportedError,
)
from mqcloud.fault import LatencyFaultTolerance
from mqcloud.message import FilterExpression, Message, MessageView, SendReceipt
from mqcloud.producer import AsyncProducer, Producer, Transaction, TransactionChecker, TransactionResolution
from mqcloud.push_consumer import AsyncPushConsumer, ConsumeResult, MessageListener, PushConsumer
from mqcloud.simple_consumer import AsyncSimpleConsumer, SimpleConsumer

__all__ = (
    "AsyncProducer",
    "AsyncPushConsumer",
    "AsyncSimpleConsumer",
    "BadRequestError",
    "BatchingOptions",
    "ClientClosedError",
    "ClientConfig",
    "ConsumeResult",
    "Credentials",
    "FilterExpression",
    "ForbiddenError",
    "HeaderTooLargeError",
    "IllegalStateError",
    "InternalError",
    "LatencyFaultTolerance",
    "MQClientError",
    "Message",
    "MessageListener",
    "MessageView",
    "NotFoundError",
    "PayloadEmptyError",
    "PayloadTooLargeError",
    "PaymentRequiredError",
    "Producer",
    "ProxyTimeoutError",
    "PushConsumer",
    "RequestTimeoutError",
    "RetryBackoff",
    "SendReceipt",
    "SimpleConsumer",
    "TooManyRequestsError",
    "Transaction",
    "TransactionChecker",
    "TransactionResolution",
    "TransportError",
    "UnauthorizedError",
    "UnsupportedError",
)
