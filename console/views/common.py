"""Small helpers every console page uses: pagination and fragment-or-page rendering."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.access import is_htmx

__all__ = ("PAGE_SIZE", "paginate", "pending", "render_list")

PAGE_SIZE = 50


def paginate(request: HttpRequest, items: Any, per_page: int = PAGE_SIZE) -> Page[Any]:
    """The requested page of ``items``; a page number out of range gives the last page."""
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def render_list(
    request: HttpRequest, page_template: str, rows_template: str, context: dict[str, Any]
) -> HttpResponse:
    """The whole page, or only its rows when htmx asks (live search, paging)."""
    return render(request, rows_template if is_htmx(request) else page_template, context)


def pending(page: Page[Any]) -> bool:
    """Whether a row on the page is still on its way to the brokers (the list then refreshes itself)."""
    return any(getattr(obj, "status", "") in ("provisioning", "deleting") for obj in page)
