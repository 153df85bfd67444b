"""Errors of the analytics jobs."""

from __future__ import annotations

__all__ = ("AnalyticsError", "AnalyticsInputError")


class AnalyticsError(Exception):
    """Base of the jobs' errors; the entry point turns them into exit code 2 and one line on stderr."""


class AnalyticsInputError(AnalyticsError):
    """The inputs cannot be billed or reported as they are (missing prices, bad date, unknown job)."""
