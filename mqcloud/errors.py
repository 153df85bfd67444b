"""Exceptions raised by the SDK, mapped from RocketMQ v2 ``Status`` codes.

The mapping follows the official clients' result checkers: 400xx are bad requests, 40100 is
unauthorized, 40300 forbidden, 404xx not found, 413xx payload too large, 42900 too many requests and
5xxxx internal or unsupported. ``MESSAGE_NOT_FOUND`` (40401) is not an error: it is an empty receive.
"""

from __future__ import annotations

from typing import Any

__all__ = (
    "BadRequestError",
    "ClientClosedError",
    "ForbiddenError",
    "HeaderTooLargeError",
    "IllegalStateError",
    "InternalError",
    "MQClientError",
    "NotFoundError",
    "PayloadEmptyError",
    "PayloadTooLargeError",
    "PaymentRequiredError",
    "ProxyTimeoutError",
    "RequestTimeoutError",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "UnsupportedError",
    "check_status",
    "error_for_code",
    "is_retriable",
)

OK = 20000
MULTIPLE_RESULTS = 30000
MESSAGE_NOT_FOUND = 40401


class MQClientError(Exception):
    """Base class of every SDK error. ``code`` is the v2 ``Code`` (0 when not from a Status)."""

    def __init__(self, message: str, code: int = 0, request_id: str = "") -> None:
        self.code = code
        self.message = message
        self.request_id = request_id
        text = f"[code={code}] {message}" if code else message
        if request_id:
            text += f" (request id {request_id})"
        super().__init__(text)


class BadRequestError(MQClientError):
    """400xx: the request was malformed (illegal topic, tag, invisible time, receipt handle, ...)."""


class UnauthorizedError(MQClientError):
    """40100: the access key or signature was refused."""


class PaymentRequiredError(MQClientError):
    """40200."""


class ForbiddenError(MQClientError):
    """40300: the key lacks the permission, or no readable/writable queue."""


class NotFoundError(MQClientError):
    """404xx: topic or consumer group does not exist."""


class RequestTimeoutError(MQClientError):
    """40800."""


class PayloadTooLargeError(MQClientError):
    """413xx: body above the topic's maximum message size."""


class PayloadEmptyError(MQClientError):
    """41302: empty message body."""


class TooManyRequestsError(MQClientError):
    """42900: throttled by a quota; retried with backoff by the producer."""


class HeaderTooLargeError(MQClientError):
    """431xx: properties too large."""


class InternalError(MQClientError):
    """5000x: the broker failed; retriable."""


class ProxyTimeoutError(MQClientError):
    """5040x: the broker timed out (e.g. persisting to replicas); retriable."""


class UnsupportedError(MQClientError):
    """5050x, NOT_IMPLEMENTED and any unknown code."""


class IllegalStateError(MQClientError):
    """The response carried no status, or the client is in the wrong state."""


class ClientClosedError(IllegalStateError):
    """The client was shut down (or never started)."""


class TransportError(MQClientError):
    """A gRPC-level failure (UNAVAILABLE, DEADLINE_EXCEEDED, ...): the broker was not reached or did
    not answer in time. ``grpc_code`` carries the gRPC status name."""

    def __init__(self, message: str, grpc_code: str = "", request_id: str = "") -> None:
        self.grpc_code = grpc_code
        super().__init__(f"{grpc_code}: {message}" if grpc_code else message, 0, request_id)


def error_for_code(code: int, message: str = "", request_id: str = "") -> MQClientError:
    """The exception for a non-success v2 ``Code``."""
    cls: type[MQClientError]
    if code == 40100:
        cls = UnauthorizedError
    elif code == 40200:
        cls = PaymentRequiredError
    elif code == 40300:
        cls = ForbiddenError
    elif 40400 <= code < 40500:
        cls = NotFoundError
    elif code == 40800:
        cls = RequestTimeoutError
    elif code == 41302:
        cls = PayloadEmptyError
    elif 41300 <= code < 41400:
        cls = PayloadTooLargeError
    elif code == 42900:
        cls = TooManyRequestsError
    elif 43100 <= code < 43200:
        cls = HeaderTooLargeError
    elif 40000 <= code < 41000:
        cls = BadRequestError
    elif 50000 <= code < 50100:
        cls = InternalError
    elif 50400 <= code < 50500:
        cls = ProxyTimeoutError
    else:
        cls = UnsupportedError
    return cls(message or f"status code {code}", code, request_id)


def check_status(status: Any, request_id: str = "") -> None:
    """Raise the mapped error unless ``status`` is OK, MULTIPLE_RESULTS or MESSAGE_NOT_FOUND."""
    if status is None:
        raise IllegalStateError("response carried no status", 0, request_id)
    code = int(status.code)
    if code in (OK, MULTIPLE_RESULTS, MESSAGE_NOT_FOUND):
        return
    if code == 0:
        raise IllegalStateError("response status code is unset", 0, request_id)
    raise error_for_code(code, status.message, request_id)


def is_retriable(exc: BaseException) -> bool:
    """Whether a send may be retried (on another broker group when there is one)."""
    return isinstance(
        exc, TransportError | InternalError | ProxyTimeoutError | TooManyRequestsError | RequestTimeoutError
    )
