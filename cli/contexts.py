"""Contexts: named control-plane connections (URL, token, defaults), kept in one JSON file.

The file holds API tokens and access-key secrets, so it is written with mode 0600 (through a temp file
in the same directory, renamed over the old one) inside a 0700 directory. Where it lives:
``$MQCTL_CONFIG`` (a file path) if set, else ``$XDG_CONFIG_HOME/mqctl/contexts.json``, else
``~/.config/mqctl/contexts.json``.

Layout::

    {"current": "prod",
     "contexts": {"prod": {"url": "https://mq.example.com", "token": "...", "tenant": "acme",
                           "endpoint": "broker.example.com:8081",
                           "credentials": {"acme": {"access_key": "AK...", "secret_key": "..."}}}}}
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cli.config import AppEnvVars
from cli.errors import CliError, ExitCode

__all__ = ("Context", "ContextStore", "Credentials", "contexts_path")

FILE_MODE = 0o600
DIR_MODE = 0o700


def contexts_path() -> Path:
    """Where the contexts file is (see the module docstring)."""
    explicit = os.environ.get(AppEnvVars.CONFIG)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "mqctl" / "contexts.json"


@dataclass(slots=True)
class Credentials:
    """A tenant access key pair saved for the message commands."""

    access_key: str
    secret_key: str


@dataclass(slots=True)
class Context:
    """One control plane and the defaults used with it."""

    url: str
    token: str = ""
    tenant: str = ""
    endpoint: str = ""
    credentials: dict[str, Credentials] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Context:
        creds = {
            ns: Credentials(str(c.get("access_key", "")), str(c.get("secret_key", "")))
            for ns, c in (data.get("credentials") or {}).items()
            if isinstance(c, dict)
        }
        return cls(
            url=str(data.get("url", "")),
            token=str(data.get("token", "")),
            tenant=str(data.get("tenant", "")),
            endpoint=str(data.get("endpoint", "")),
            credentials=creds,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ContextStore:
    """The contexts file, loaded whole and saved whole."""

    path: Path
    current: str = ""
    contexts: dict[str, Context] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None) -> ContextStore:
        path = path or contexts_path()
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from exc
        try:
            data = json.loads(raw)
            contexts = {str(k): Context.from_dict(v) for k, v in (data.get("contexts") or {}).items()}
        except (ValueError, AttributeError) as exc:
            raise CliError(f"{path} is not a valid contexts file: {exc}") from exc
        return cls(path, str(data.get("current") or ""), contexts)

    def get(self, name: str | None = None) -> Context | None:
        """The named context, or the current one when ``name`` is empty."""
        name = name or self.current
        if not name:
            return None
        found = self.contexts.get(name)
        if found is None:
            known = ", ".join(sorted(self.contexts)) or "none yet; run mqctl login"
            raise CliError(f"no context named {name!r} (known: {known})", ExitCode.NOT_FOUND)
        return found

    def save(self) -> None:
        """Write the file atomically with mode 0600 (a reader never sees a half-written file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        body = json.dumps(
            {"current": self.current, "contexts": {k: v.to_dict() for k, v in self.contexts.items()}},
            indent=2,
            sort_keys=True,
        )
        fd, tmp = tempfile.mkstemp(prefix=".contexts-", dir=self.path.parent)  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).chmod(FILE_MODE)
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
