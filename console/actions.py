"""Calling a service from a form: domain errors become form errors, nothing else is decided here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.db.models import ProtectedError

from tenants.errors import ControlPlaneError

__all__ = ("attempt", "changes_of", "fetch")

T = TypeVar("T")


def attempt(form: forms.BaseForm, call: Callable[[], T]) -> T | None:
    """Run ``call``; on a domain error put its message on the form's fields and return None.

    The form keeps what was typed, so the page re-renders with the input and the reason.
    """
    try:
        return call()
    except ControlPlaneError as exc:
        placed = False
        for name, messages in exc.fields.items():
            if name in form.fields:
                for message in messages:
                    form.add_error(name, message)
                placed = True
        if not placed:
            form.add_error(None, exc.message)
    except ProtectedError as exc:
        used_by = sorted({str(obj) for obj in exc.protected_objects})[:5]
        form.add_error(None, f"Still in use by: {', '.join(used_by)}. Remove those first.")
    return None


def changes_of(form: forms.BaseForm) -> dict[str, Any]:
    """The fields the user changed, with their cleaned values (what an update service takes)."""
    return {name: form.cleaned_data[name] for name in form.changed_data if name in form.cleaned_data}


def fetch(call: Callable[[], T]) -> tuple[T | None, str]:
    """Read from the brokers; a broker that cannot answer gives (None, why) for the page to show."""
    try:
        return call(), ""
    except ControlPlaneError as exc:
        return None, exc.message
