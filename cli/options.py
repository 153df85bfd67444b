"""Options several command groups share, each with its environment variable (shown in --help)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.config import AppEnvVars
from cli.output import OutputFormat

__all__ = ("DEFAULT_WAIT_TIMEOUT", "NoWait", "Output", "Tenant", "WaitTimeout")

DEFAULT_WAIT_TIMEOUT = 60.0

Output = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        envvar=AppEnvVars.OUTPUT,
        case_sensitive=False,
        help="How to print the result: table for people, json/yaml for scripts.",
    ),
]

Tenant = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        "-t",
        envvar=AppEnvVars.TENANT,
        help="Tenant namespace (default: the context's tenant).",
        show_default=False,
    ),
]

NoWait = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        help="Return at once instead of waiting until the brokers have applied the change.",
    ),
]

WaitTimeout = Annotated[
    float,
    typer.Option(
        "--wait-timeout",
        envvar=AppEnvVars.WAIT_TIMEOUT,
        min=0.1,
        help="Seconds to wait for the brokers before giving up (exit 8).",
    ),
]
