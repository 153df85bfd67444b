"""How the message commands reach a broker with the SDK: which endpoint, which access key.

Endpoint, first found wins:
  1. ``--endpoint`` / ``MQCTL_ENDPOINT``;
  2. the context's ``endpoint`` (``mqctl login --endpoint`` or ``mqctl context set --endpoint``);
  3. the tenant's cluster (else the default cluster) looked up in the broker registry: the enabled
     masters (broker id 0), joined with ``;`` as SDK access points. The registry is readable by
     operators only, so tenants set the endpoint their operator gives them (1 or 2).
Credentials: ``--access-key``/``--secret-key`` (``MQCTL_ACCESS_KEY``/``MQCTL_SECRET_KEY``), else the key
saved in the context for that tenant (``mqctl key create --save``), else none (anonymous; a broker
that enforces authentication then refuses, exit 5).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.config import AppEnvVars
from cli.errors import CliError, ExitCode
from cli.session import current

if TYPE_CHECKING:
    from mqcloud import ClientConfig, MessageView

__all__ = (
    "AccessKeyOpt",
    "EndpointOpt",
    "SecretKeyOpt",
    "client_config",
    "message_line",
    "message_record",
    "resolve_endpoint",
)

EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        envvar=AppEnvVars.ENDPOINT,
        help="Broker access point HOST:PORT (default: the context's, else the tenant's cluster).",
        show_default=False,
    ),
]
AccessKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--access-key",
        envvar=AppEnvVars.ACCESS_KEY,
        help="Tenant access key (default: the one saved in the context).",
        show_default=False,
    ),
]
SecretKeyOpt = Annotated[
    str | None,
    typer.Option("--secret-key", envvar=AppEnvVars.SECRET_KEY, help="Its secret.", show_default=False),
]


def resolve_endpoint(tenant: str, flag: str | None) -> str:
    """The broker access point for ``tenant`` (see the module docstring for the order)."""
    if flag:
        return flag
    session = current()
    ctx = session.context()
    if ctx is not None and ctx.endpoint:
        return ctx.endpoint
    from cli.commands.clusters import master_endpoints

    try:
        cluster = session.api().tenant(tenant).get("cluster")
        endpoints = master_endpoints(int(cluster) if cluster else None)
    except CliError as exc:
        if exc.code not in (ExitCode.PERMISSION, ExitCode.NOT_FOUND):
            raise
        endpoints = []
    if not endpoints:
        raise CliError(
            "no broker endpoint known: pass --endpoint HOST:PORT, set MQCTL_ENDPOINT, "
            "or run mqctl context set --endpoint HOST:PORT",
            ExitCode.USAGE,
        )
    return ";".join(endpoints)


def client_config(
    tenant: str, endpoint: str | None, access_key: str | None, secret_key: str | None
) -> ClientConfig:
    """An SDK configuration for ``tenant``'s namespace on its broker."""
    from mqcloud import ClientConfig, Credentials
    from mqcloud.config import parse_endpoints

    if (access_key is None) != (secret_key is None):
        raise CliError("--access-key and --secret-key go together", ExitCode.USAGE)
    credentials = None
    if access_key is not None and secret_key is not None:
        credentials = Credentials(access_key, secret_key)
    else:
        saved = current().credentials(tenant)
        if saved is not None:
            credentials = Credentials(saved.access_key, saved.secret_key)
        else:
            output.warn(
                f"no access key for tenant {tenant}: connecting without one (see mqctl key create --save)"
            )
    address = resolve_endpoint(tenant, endpoint)
    try:
        parse_endpoints(address)
    except ValueError as exc:
        raise CliError(f"bad endpoint {address!r}: {exc}", ExitCode.USAGE) from exc
    return ClientConfig(address, credentials=credentials, namespace=tenant)


def _iso(epoch_s: float | None) -> str | None:
    if not epoch_s:
        return None
    return datetime.fromtimestamp(epoch_s, UTC).isoformat().replace("+00:00", "Z")


def _text(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def message_record(m: MessageView) -> dict[str, Any]:
    """A received message for --output json/yaml (the body as text when it is UTF-8, always base64)."""
    return {
        "message_id": m.message_id,
        "topic": m.topic,
        "tag": m.tag,
        "keys": list(m.keys),
        "properties": dict(m.properties),
        "message_group": m.message_group,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "born_time": _iso(m.born_timestamp),
        "born_host": m.born_host,
        "delivery_time": _iso(m.delivery_timestamp),
        "delivery_attempt": m.delivery_attempt,
        "body": _text(m.body),
        "body_base64": base64.b64encode(m.body).decode("ascii"),
        "body_size": len(m.body),
    }


def message_line(record: dict[str, Any], max_body: int = 200) -> str:
    """One line for people: time, queue/offset, id, tag, keys, body (shortened)."""
    body = record.get("body")
    if body is None:
        body = f"<{record.get('body_size', 0)} bytes, not UTF-8>"
    body = body.replace("\n", "\\n")
    if len(body) > max_body:
        body = body[:max_body] + "..."
    tag = f" tag={record['tag']}" if record.get("tag") else ""
    keys = f" keys={','.join(record['keys'])}" if record.get("keys") else ""
    return (
        f"{record.get('born_time') or '-'} q{record.get('queue_id')}@{record.get('queue_offset')} "
        f"{record.get('message_id')}{tag}{keys} {body}"
    )
