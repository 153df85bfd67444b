"""Template helpers of the console: current-page marks, sizes, durations."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

__all__ = ("current", "humanbytes", "humanms", "limit_label")


@register.simple_tag(takes_context=True)
def current(context: dict[str, Any], *prefixes: str) -> SafeString:
    """``aria-current="page"`` when the page's URL name is one of, or starts with, the prefixes."""
    section = str(context.get("nav_section") or "")
    for prefix in prefixes:
        if section == prefix or (prefix.endswith("-") and section.startswith(prefix)):
            return mark_safe('aria-current="page"')  # a constant
    return SafeString("")


@register.filter
def humanbytes(value: Any) -> str:
    """1536 -> '1.5 KiB'."""
    try:
        size = float(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


@register.filter
def humanms(value: Any) -> str:
    """Milliseconds as the largest sensible unit: 90000 -> '1.5 min'."""
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


@register.filter
def limit_label(name: str) -> str:
    """'produce_messages_per_s' -> 'Produce messages per s'."""
    return str(name).replace("_", " ").capitalize()


@register.filter
def is_bytes(name: str) -> bool:
    return "bytes" in str(name)


@register.filter
def get_attr(obj: Any, name: str) -> Any:
    """``obj|get_attr:"field"`` for field names held in a variable."""
    return getattr(obj, str(name), None)
