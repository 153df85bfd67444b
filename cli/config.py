"""mqctl's configuration: the environment variables it reads, shown in ``--help``.

Options resolve as flag > environment variable > current context (cli/contexts.py) > default. The
well-known variables below are declared on the options that share them across commands; every other
option reads ``MQCTL_<GROUP>_<COMMAND>_<OPTION>`` (click's automatic prefix, set in cli/main.py), which
``--help`` shows next to it. There is no pydantic settings object here on purpose: importing pydantic
costs ~0.2 s on every invocation and mqctl must start fast; Typer's ``envvar`` does the same job.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ("AUTO_ENVVAR_PREFIX", "AppEnvVars")

AUTO_ENVVAR_PREFIX = "MQCTL"


class AppEnvVars(StrEnum):
    """Environment variable names mqctl reads; they appear in the help text."""

    CONFIG = "MQCTL_CONFIG"  # the contexts file (else $XDG_CONFIG_HOME/mqctl/contexts.json)
    CONTEXT = "MQCTL_CONTEXT"
    API_URL = "MQCTL_API_URL"
    TOKEN = "MQCTL_TOKEN"
    TENANT = "MQCTL_TENANT"
    OUTPUT = "MQCTL_OUTPUT"
    DEBUG = "MQCTL_DEBUG"
    HTTP_TIMEOUT = "MQCTL_HTTP_TIMEOUT"
    WAIT_TIMEOUT = "MQCTL_WAIT_TIMEOUT"
    ENDPOINT = "MQCTL_ENDPOINT"  # broker access point for the message commands
    ACCESS_KEY = "MQCTL_ACCESS_KEY"
    SECRET_KEY = "MQCTL_SECRET_KEY"
    BROKER = "MQCTL_BROKER"  # mqctl admin: the broker's admin endpoint
    DATA_DIR = "MQ_DATA_DIR"
