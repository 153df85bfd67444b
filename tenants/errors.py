"""Domain errors of the control plane; the DRF handler maps them to HTTP once (api/exceptions.py)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

__all__ = (
    "AlreadyExists",
    "AnalyticsJobFailed",
    "BrokerUnavailable",
    "ControlPlaneError",
    "ErrorCode",
    "InvalidState",
    "PermissionDeniedError",
    "QuotaExceeded",
)


class ErrorCode(StrEnum):
    """The ``error.code`` values of API responses."""

    INVALID = "invalid"
    NOT_AUTHENTICATED = "not_authenticated"
    AUTHENTICATION_FAILED = "authentication_failed"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    ALREADY_EXISTS = "already_exists"
    CONFLICT = "conflict"
    PROTECTED = "protected"
    INVALID_STATE = "invalid_state"
    QUOTA_EXCEEDED = "quota_exceeded"
    BROKER_UNAVAILABLE = "broker_unavailable"


class ControlPlaneError(Exception):
    """Base of domain errors; class attributes say how the outside sees them."""

    code: ClassVar[ErrorCode] = ErrorCode.INVALID
    http_status: ClassVar[int] = 400
    retriable: ClassVar[bool] = False

    def __init__(self, message: str, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class PermissionDeniedError(ControlPlaneError):
    code = ErrorCode.PERMISSION_DENIED
    http_status = 403


class AlreadyExists(ControlPlaneError):
    code = ErrorCode.ALREADY_EXISTS
    http_status = 409


class InvalidState(ControlPlaneError):
    """The object is in a state that does not allow the change (e.g. being deleted)."""

    code = ErrorCode.INVALID_STATE
    http_status = 409


class QuotaExceeded(ControlPlaneError):
    """Admission refused: the tenant's plan or quota does not allow one more."""

    code = ErrorCode.QUOTA_EXCEEDED
    http_status = 409


class BrokerUnavailable(ControlPlaneError):
    """A broker could not be reached or refused an admin call; provisioning retries it."""

    code = ErrorCode.BROKER_UNAVAILABLE
    http_status = 503
    retriable = True


class AnalyticsJobFailed(ControlPlaneError):
    """A Spark job (spark-submit) or the load of its results failed; the Celery task retries it."""

    code = ErrorCode.CONFLICT
    http_status = 409
    retriable = True
