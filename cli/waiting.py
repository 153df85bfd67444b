"""Wait for a provisioned resource (topic, group, key, ACL, quota) to reach the brokers.

The API answers a change with ``status: provisioning`` and a Celery task applies it; the row turns
``active`` once every broker concerned has it (``error`` while a broker refuses or is away: the task
retries, so ``error`` is not final and we keep waiting). A delete answers 202 ``deleting`` and the row
disappears when the brokers confirm.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cli import output
from cli.errors import CliError, ExitCode

if TYPE_CHECKING:
    from cli.api import ApiClient

__all__ = ("wait_active", "wait_gone")

FIRST_POLL_S = 0.2
MAX_POLL_S = 2.0


def _is_active(row: dict[str, Any]) -> bool:
    applied = row.get("applied_generation")
    generation = row.get("generation")
    caught_up = applied is None or generation is None or applied >= generation
    return row.get("status") == "active" and caught_up


def wait_active(api: ApiClient, path: str, row: dict[str, Any], what: str, timeout: float) -> dict[str, Any]:
    """Poll ``path`` until the row is active; the last row read. Exit 8 (timeout) otherwise."""
    deadline = time.monotonic() + timeout
    delay = FIRST_POLL_S
    announced = False
    while not _is_active(row):
        if time.monotonic() >= deadline:
            detail = f": {row['status_message']}" if row.get("status_message") else ""
            raise CliError(
                f"{what} is still {row.get('status')} after {timeout:g} s{detail} "
                "(the control plane keeps retrying; check again later)",
                ExitCode.TIMEOUT,
            )
        if not announced:
            output.info(f"waiting for {what} to become active on the brokers ...")
            announced = True
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, MAX_POLL_S)
        row = api.request("GET", path, not_found=what)
    return row


def wait_gone(api: ApiClient, path: str, what: str, timeout: float) -> None:
    """Poll ``path`` until it answers 404 (the brokers confirmed the delete). Exit 8 otherwise."""
    deadline = time.monotonic() + timeout
    delay = FIRST_POLL_S
    output.info(f"waiting for the brokers to remove {what} ...")
    while True:
        try:
            row = api.request("GET", path)
        except CliError as exc:
            if exc.code == ExitCode.NOT_FOUND:
                return
            raise
        if time.monotonic() >= deadline:
            detail = f": {row['status_message']}" if row.get("status_message") else ""
            raise CliError(
                f"{what} is still {row.get('status')} after {timeout:g} s{detail}", ExitCode.TIMEOUT
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, MAX_POLL_S)
