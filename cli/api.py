"""A small client for the control plane's REST API (``/api/v1/``, docs/control-plane.md).

Every error answer (``{"error": {"code", "message", "fields"}}``) becomes a :class:`CliError` with the
exit code for its HTTP status, so commands never look at status codes themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from cli.errors import CliError, ExitCode, exit_code_for_status

__all__ = ("API_PREFIX", "ApiClient", "api_root")

API_PREFIX = "/api/v1/"
PAGE_SIZE = 200
MAX_PAGES = 500  # 100k rows: a bound, so a server that keeps sending ``next`` cannot loop us forever
USER_AGENT = "mqctl"


def api_root(url: str) -> str:
    """``http://host:8000`` or ``http://host:8000/api/v1`` -> ``http://host:8000/api/v1/``."""
    url = url.strip().rstrip("/")
    if url.endswith(API_PREFIX.rstrip("/")):
        url = url[: -len(API_PREFIX.rstrip("/"))]
    if not url.startswith(("http://", "https://")):
        raise CliError(
            f"the control plane URL must start with http:// or https://, got {url!r}", ExitCode.USAGE
        )
    return url + API_PREFIX


def _describe(response: httpx.Response) -> str:
    """One line from the API's error body (or the status line when it is not ours)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"HTTP {response.status_code} {response.reason_phrase} from {response.request.url.path}"
    message = str(error.get("message") or error.get("code") or "error")
    fields = error.get("fields")
    if isinstance(fields, dict) and fields:
        parts = []
        for name, problems in fields.items():
            first = problems[0] if isinstance(problems, list) and problems else problems
            parts.append(str(first) if name == "non_field_errors" else f"{name}: {first}")
        return "; ".join(parts)
    return message


class ApiClient:
    """Token-authenticated JSON calls against one control plane."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.root = api_root(url)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self._http = httpx.Client(base_url=self.root, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        not_found: str | None = None,
    ) -> Any:
        """Call ``path`` (relative to /api/v1/); the decoded JSON body, or None for an empty one.

        ``not_found`` names the object for a 404's message ("topic orders not found").
        """
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        response = self._http.request(method, path.lstrip("/"), params=clean, json=json)
        if response.status_code >= 400:
            code = exit_code_for_status(response.status_code)
            if response.status_code == 404 and not_found:
                raise CliError(f"{not_found} not found", code)
            message = _describe(response)
            if response.status_code == 401:
                message = f"not signed in: {message} (run mqctl login, or set MQCTL_TOKEN)"
            raise CliError(message, code)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise CliError(f"the control plane answered {path} with something that is not JSON") from exc

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body if body is not None else {})

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def iter_all(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every row of a paginated list (``?limit=&offset=``)."""
        offset = 0
        for _ in range(MAX_PAGES):
            page = self.get(path, limit=PAGE_SIZE, offset=offset, **params)
            if isinstance(page, list):  # an unpaginated endpoint
                yield from page
                return
            rows = page.get("results", []) if isinstance(page, dict) else []
            yield from rows
            offset += len(rows)
            if not rows or not page.get("next"):
                return

    def list(self, path: str, **params: Any) -> list[dict[str, Any]]:
        return list(self.iter_all(path, **params))

    def find(self, path: str, what: str, **filters: Any) -> dict[str, Any]:
        """The one row matching ``filters`` (exact filters), else a not-found error naming ``what``."""
        page = self.get(path, limit=2, **filters)
        rows = page.get("results", []) if isinstance(page, dict) else page
        if not rows:
            raise CliError(f"{what} not found", ExitCode.NOT_FOUND)
        row: dict[str, Any] = rows[0]
        return row

    def tenant(self, namespace: str) -> dict[str, Any]:
        """A tenant by namespace (another tenant's reads as not found, as the API does)."""
        return self.find("tenants/", f"tenant {namespace!r}", namespace=namespace)
