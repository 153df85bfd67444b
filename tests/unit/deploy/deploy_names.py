"""What the code actually offers, for checking deploy files against it: env vars, ports, commands.

Every deploy file (Dockerfile, entrypoint, compose, Helm, systemd, the local cluster) may only name
an environment variable some settings class reads, a port some default listens on, and a command
the Typer app, Celery, gunicorn or manage.py really has.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer.main
from django.core.management import get_commands

from cli.config import AppEnvVars
from cli.main import app as mqctl_app
from config.env import PlatformSettings
from dataplane.config import BrokerSettings
from dataplane.ha.controller.settings import ControllerSettings

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = "/opt/mqcloud/.venv/bin/"
ENTRYPOINT = REPO / "deploy" / "docker" / "entrypoint.sh"

# Read by Django, Python or the image itself rather than by one of our settings classes.
RUNTIME_ENV = {"DJANGO_SETTINGS_MODULE", "PYTHONUNBUFFERED", "PATH"}
# The Kubernetes downward API: set only to be interpolated into another variable.
DOWNWARD_ENV = {"POD_NAME"}


def known_env() -> set[str]:
    names = {f.alias for f in PlatformSettings.model_fields.values() if f.alias}
    names |= {f"MQ_BROKER_{name.upper()}" for name in BrokerSettings.model_fields}
    names |= {f"MQ_CONTROLLER_{name.upper()}" for name in ControllerSettings.model_fields}
    names |= {str(v) for v in AppEnvVars} | _declared_envvars(typer.main.get_command(mqctl_app))
    return names | RUNTIME_ENV


def _declared_envvars(command: Any) -> set[str]:
    """Every environment variable an mqctl option declares, in every subcommand."""
    names: set[str] = set()
    for param in getattr(command, "params", ()):
        envvar = getattr(param, "envvar", None)
        names |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    for sub in getattr(command, "commands", {}).values():
        names |= _declared_envvars(sub)
    return names


def _port(hostport: str) -> int:
    return int(hostport.rpartition(":")[2])


def known_ports() -> dict[str, int]:
    """Default ports by role, read from the settings defaults (docs/operations.md lists them)."""
    http = PlatformSettings.model_fields["http_listen"].default
    broker = BrokerSettings.model_fields["listen"].default
    metrics = BrokerSettings.model_fields["metrics_listen"].default
    replication = BrokerSettings.model_fields["ha_listen"].default
    controller = ControllerSettings.model_fields["listen"].default
    return {
        "control-plane": _port(http),
        "broker": _port(broker),
        "broker-metrics": _port(metrics),
        "broker-replication": _port(replication),
        "controller": _port(controller),
    }


def entrypoint_roles() -> set[str]:
    """The ``case`` arms of deploy/docker/entrypoint.sh."""
    return set(re.findall(r"^\s+([a-z-]+)\)\s*$", ENTRYPOINT.read_text(), re.MULTILINE))


def _typer_has(argv: list[str]) -> bool:
    """``argv`` names a leaf command of mqctl (groups are duck-typed: Typer may vendor click)."""
    command: Any = typer.main.get_command(mqctl_app)
    for word in argv:
        if word.startswith("-") or not hasattr(command, "commands"):
            break
        command = command.commands.get(word)
        if command is None:
            return False
    return not hasattr(command, "commands")


def _module_attr_exists(spec: str) -> bool:
    module, _, attr = spec.partition(":")
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        return False
    return not attr or re.search(rf"^{attr}\s*=", Path(found.origin).read_text(), re.MULTILINE) is not None


def check_command(argv: Iterable[str]) -> str | None:
    """``None`` when the command exists in the code; otherwise what is wrong with it."""
    words = [w.removeprefix(VENV_BIN) for w in argv]
    if not words:
        return "empty command"
    program, rest = words[0], words[1:]
    if program == "mqctl":
        return None if _typer_has(rest) else f"no such mqctl command: {' '.join(rest)}"
    if program == "celery":
        import celery.bin.celery

        if rest[:2] != ["-A", "config"]:
            return f"celery must load the app from config: {words}"
        sub = rest[2] if len(rest) > 2 else ""
        return None if sub in celery.bin.celery.celery.commands else f"no such celery command {sub!r}"
    if program == "gunicorn":
        config = rest[rest.index("-c") + 1].removeprefix("python:") if "-c" in rest else ""
        app_spec = next((w for w in rest if ":" in w and not w.startswith("python:")), "")
        if not _module_attr_exists(config) or not _module_attr_exists(app_spec):
            return f"gunicorn config {config!r} or app {app_spec!r} not found"
        return None
    if program == "python" and rest[:1] == ["manage.py"]:
        sub = rest[1] if len(rest) > 1 else ""
        return None if sub in get_commands() else f"no such manage.py command {sub!r}"
    if program == "sh" and rest[:1] == ["-c"]:
        return check_shell(rest[1])
    if program in entrypoint_roles():
        return None
    return f"unknown program {program!r}"


def check_shell(script: str) -> str | None:
    """Each simple command of a one-line shell script (``until X; do Y; done``, ``a && b``)."""
    for part in re.split(r";|&&|\|\|", script):
        words = shlex.split(part.replace(">/dev/null", ""))
        while words and words[0] in ("until", "while", "do", "done", "then", "fi", "if"):
            words = words[1:]
        if not words or words[0] in ("sleep", "exec", "true"):
            continue
        problem = check_command(words)
        if problem:
            return problem
    return None
