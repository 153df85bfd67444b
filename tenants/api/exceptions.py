"""One DRF exception handler: every API error has the same JSON shape.

``{"error": {"code": "...", "message": "one line for people", "fields": {"name": ["..."]}}}``
"""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

__all__ = ("api_exception_handler",)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ProtectedError):
        return Response(
            {"error": {"code": "protected", "message": "The object is still in use.", "fields": {}}},
            status=status.HTTP_409_CONFLICT,
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    code = getattr(exc, "default_code", "error")
    if isinstance(exc, ValidationError):
        detail = response.data
        fields = detail if isinstance(detail, dict) else {"non_field_errors": detail}
        first = next(iter(fields.values()), ["Invalid input."])
        message = str(first[0] if isinstance(first, list) and first else first)
        response.data = {"error": {"code": "invalid", "message": message, "fields": fields}}
    else:
        message = response.data.get("detail", str(exc)) if isinstance(response.data, dict) else str(exc)
        response.data = {"error": {"code": str(code), "message": str(message), "fields": {}}}
    return response
