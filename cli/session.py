"""What one mqctl invocation knows: the global flags, the chosen context, and (lazily) an API client.

The root callback in cli/main.py starts a :class:`Session` with :func:`begin`; commands reach it with
:func:`current`. Nothing here reads the contexts file or opens a connection until a command asks, so
``mqctl broker start`` and ``--help`` never touch either. One invocation runs at a time per process
(also under Typer's CliRunner), so a module-level slot is enough.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cli.config import AppEnvVars
from cli.contexts import Context, ContextStore, Credentials
from cli.errors import CliError, ExitCode

if TYPE_CHECKING:
    from cli.api import ApiClient

__all__ = ("Session", "begin", "current", "env_flag")

DEFAULT_HTTP_TIMEOUT = 30.0


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(slots=True)
class Session:
    """Global flags of this invocation; ``api()`` and ``store()`` load on first use."""

    context_name: str = ""
    url: str = ""
    token: str = ""
    debug: bool = False
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    _store: ContextStore | None = field(default=None, repr=False)
    _api: ApiClient | None = field(default=None, repr=False)

    def store(self) -> ContextStore:
        if self._store is None:
            self._store = ContextStore.load()
        return self._store

    def context(self) -> Context | None:
        """The context named by --context / MQCTL_CONTEXT, else the current one (None if none)."""
        return self.store().get(self.context_name or None)

    def api(self) -> ApiClient:
        """A client for the control plane: --url/--token (or their env vars) over the context's."""
        if self._api is None:
            from cli.api import ApiClient

            ctx = self.context() if not (self.url and self.token) else None
            url = self.url or (ctx.url if ctx else "")
            token = self.token or (ctx.token if ctx else "")
            if not url:
                raise CliError(
                    "no control plane configured: run mqctl login --url URL, or set MQCTL_API_URL",
                    ExitCode.USAGE,
                )
            self._api = ApiClient(url, token, timeout=self.http_timeout)
        return self._api

    def tenant(self, flag: str | None) -> str:
        """The tenant namespace: --tenant / MQCTL_TENANT, else the context's default."""
        if flag:
            return flag
        ctx = self.context()
        if ctx is not None and ctx.tenant:
            return ctx.tenant
        raise CliError(
            "which tenant? pass --tenant NAMESPACE, set MQCTL_TENANT, or run mqctl context set --tenant NS",
            ExitCode.USAGE,
        )

    def credentials(self, tenant: str) -> Credentials | None:
        """The access key saved in the context for ``tenant`` (``key create --save``), if any."""
        ctx = self.context()
        return ctx.credentials.get(tenant) if ctx is not None else None

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None


_current: Session | None = None


def begin(session: Session) -> Session:
    """Make ``session`` the one commands see (called by the root callback)."""
    global _current
    if _current is not None:
        _current.close()
    _current = session
    return session


def current() -> Session:
    """The running invocation's session (a default one when called outside the root app)."""
    global _current
    if _current is None:
        _current = Session(debug=env_flag(AppEnvVars.DEBUG))
    return _current
