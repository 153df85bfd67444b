"""One DRF exception handler: every API error has the same JSON shape.

``{"error": {"code": "...", "message": "one line for people", "fields": {"name": ["..."]}}}``

Mapping: validation -> 400 ``invalid`` (a uniqueness failure -> 409 ``already_exists``); domain errors
(``tenants.errors``) -> their own status and code; ``ProtectedError`` -> 409 ``protected``;
``IntegrityError`` (a race past the checks) -> 409 ``conflict``; 401/403/404/405 keep DRF's status.
"""

from __future__ import annotations

from typing import Any

from django.db import DataError, IntegrityError
from django.db.models import ProtectedError
from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

from tenants.errors import ControlPlaneError, ErrorCode

__all__ = ("api_exception_handler", "error_body")


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": str(code), "message": message, "fields": fields or {}}}


def _first_message(fields: dict[str, Any]) -> str:
    first: Any = next(iter(fields.values()), ["Invalid input."])
    while isinstance(first, list | dict) and first:
        first = first[0] if isinstance(first, list) else next(iter(first.values()))
    return str(first) if first else "Invalid input."


def _only_unique_failures(codes: Any) -> bool:
    if not isinstance(codes, dict) or not codes:
        return False
    flat = [c for value in codes.values() for c in (value if isinstance(value, list) else [value])]
    return bool(flat) and all(c == "unique" for c in flat)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ControlPlaneError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.http_status)
    if isinstance(exc, ProtectedError):
        names = sorted({str(obj._meta.verbose_name_plural) for obj in exc.protected_objects})
        message = "The object is still in use" + (f" by {', '.join(map(str, names))}." if names else ".")
        return Response(error_body(ErrorCode.PROTECTED, message), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, OverflowError):  # a filter value past the database's integer range
        return Response(error_body(ErrorCode.INVALID, "A number is out of range."), status=400)
    if isinstance(exc, DataError):  # a value Python accepts but the database cannot store or compare
        return Response(
            error_body(ErrorCode.INVALID, "A value is out of the range the database accepts."), status=400
        )
    if isinstance(exc, IntegrityError):
        return Response(
            error_body(ErrorCode.CONFLICT, "The change conflicts with another object; reload and retry."),
            status=status.HTTP_409_CONFLICT,
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        detail = response.data
        fields = detail if isinstance(detail, dict) else {"non_field_errors": detail}
        if _only_unique_failures(exc.get_codes()):
            response.status_code = status.HTTP_409_CONFLICT
            response.data = error_body(ErrorCode.ALREADY_EXISTS, _first_message(fields), fields)
        else:
            response.data = error_body(ErrorCode.INVALID, _first_message(fields), fields)
        return response
    code = ErrorCode.NOT_FOUND if isinstance(exc, Http404) else getattr(exc, "default_code", "error")
    message = response.data.get("detail", str(exc)) if isinstance(response.data, dict) else str(exc)
    response.data = error_body(str(code), str(message))
    return response
