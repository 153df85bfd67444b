"""``mqctl admin``: drive a broker's admin gRPC API (mqcloud.admin.v1.BrokerAdmin)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError

__all__ = ("app",)

app = typer.Typer(no_args_is_help=True)
topic_app = typer.Typer(no_args_is_help=True, help="Topics: create, update, delete, list, stats.")
group_app = typer.Typer(no_args_is_help=True, help="Consumer groups: create, update, delete, list, stats.")
app.add_typer(topic_app, name="topic")
app.add_typer(group_app, name="group")

_state: dict[str, Any] = {"broker": "127.0.0.1:8081", "json": False, "output": "table", "token": None}

TOPIC_COLUMNS = ("name", "queue_count", "message_type", "retention_hours", "max_message_bytes", "namespace")
GROUP_COLUMNS = ("name", "fifo", "max_delivery_attempts", "broadcast", "namespace")
# Where an operator finds the token a broker outside development mode asks for.
TOKEN_HINT = "pass --token or set MQ_BROKER_ADMIN_TOKEN; mqctl standalone prints its broker's at start"


@app.callback()
def main(
    broker: Annotated[
        str, typer.Option("--broker", envvar="MQCTL_BROKER", help="Broker HOST:PORT [MQCTL_BROKER]")
    ] = "127.0.0.1:8081",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of tables (= -o json)")
    ] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--output", "-o", envvar="MQCTL_OUTPUT", help="table, json or yaml (before the subcommand)."
        ),
    ] = "table",
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="MQ_BROKER_ADMIN_TOKEN", help="Broker operator token [MQ_BROKER_ADMIN_TOKEN]"
        ),
    ] = None,
) -> None:
    from cli.errors import CliError, ExitCode

    if fmt not in ("table", "json", "yaml"):
        raise CliError(f"--output must be table, json or yaml, not {fmt!r}", ExitCode.USAGE)
    _state["broker"] = broker
    _state["json"] = json_output
    _state["output"] = "json" if json_output else fmt
    _state["token"] = token


@contextmanager
def _client() -> Iterator[BrokerAdminClient]:
    from mqcloud.admin_client import BrokerAdminClient, BrokerAdminError

    client = BrokerAdminClient(_state["broker"], token=_state["token"])
    try:
        yield client
    except BrokerAdminError as exc:
        fail(exc)
    finally:
        client.close()


def fail(exc: BrokerAdminError) -> NoReturn:
    """Exit with a broker's refusal as one line, and the exit code of its meaning (docs/cli.md)."""
    from cli.errors import exit_code_for_grpc
    from cli.output import abort

    hint = f" (no token given: {TOKEN_HINT})" if exc.code == "UNAUTHENTICATED" and not _state["token"] else ""
    abort(f"{exc.code}: {exc.message}{hint}", exit_code_for_grpc(exc.code))


def _show(rows: list[dict[str, Any]], columns: tuple[str, ...], title: str | None = None) -> None:
    from cli.output import emit

    emit(rows, _state["output"], columns, title=title)


def _dicts(messages: Any) -> list[dict[str, Any]]:
    from mqcloud.admin_client import to_dict

    return [_numbers(m, to_dict(m)) for m in messages]


def _numbers(message: Any, data: dict[str, Any]) -> dict[str, Any]:
    """64-bit integers as JSON numbers: proto3's JSON mapping writes them as strings, and a script
    comparing ``.lag_ms > 1000`` in jq would compare a string with a number."""
    from google.protobuf.descriptor import FieldDescriptor as F

    wide = {F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64}
    for field in message.DESCRIPTOR.fields:
        value = data.get(field.name)
        if value is None:
            continue
        repeated = field.is_repeated
        if field.type in wide:
            data[field.name] = [int(v) for v in value] if repeated else int(value)
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            nested = getattr(message, field.name)
            if repeated:
                data[field.name] = [_numbers(m, d) for m, d in zip(nested, value, strict=True)]
            else:
                data[field.name] = _numbers(nested, value)
    return data


Name = Annotated[str, typer.Argument(help="Qualified name ns%name (or bare name with --namespace)")]


@topic_app.command("create")
def topic_create(
    name: Name,
    queues: Annotated[int, typer.Option("--queues", min=1, help="Number of queues.")] = 8,
    message_type: Annotated[
        str, typer.Option("--type", help="NORMAL|FIFO|DELAY|TRANSACTION|MIXED")
    ] = "NORMAL",
    retention_hours: Annotated[int, typer.Option("--retention-hours")] = 0,
    max_message_bytes: Annotated[int, typer.Option("--max-message-bytes")] = 0,
    namespace: Annotated[str, typer.Option("--namespace")] = "",
) -> None:
    """Create a topic."""
    with _client() as c:
        topic = c.create_topic(
            name,
            queue_count=queues,
            message_type=message_type,
            retention_hours=retention_hours,
            max_message_bytes=max_message_bytes,
            namespace=namespace,
        )
        _show(_dicts([topic]), TOPIC_COLUMNS)


@topic_app.command("update")
def topic_update(
    name: Name,
    queues: Annotated[int | None, typer.Option("--queues", min=1, help="Number of queues.")] = None,
    message_type: Annotated[str | None, typer.Option("--type")] = None,
    retention_hours: Annotated[int | None, typer.Option("--retention-hours")] = None,
    max_message_bytes: Annotated[int | None, typer.Option("--max-message-bytes")] = None,
) -> None:
    """Change a topic (only the options given)."""
    with _client() as c:
        topic = c.update_topic(
            name,
            queue_count=queues,
            message_type=message_type,
            retention_hours=retention_hours,
            max_message_bytes=max_message_bytes,
        )
        _show(_dicts([topic]), TOPIC_COLUMNS)


@topic_app.command("delete")
def topic_delete(name: Name) -> None:
    """Delete a topic's configuration and every group's offsets on it (messages age out by retention)."""
    from cli.output import success

    with _client() as c:
        c.delete_topic(name)
    success(f"topic {name} deleted")


@topic_app.command("list")
def topic_list(namespace: Annotated[str, typer.Option("--namespace")] = "") -> None:
    """List topics."""
    with _client() as c:
        _show(_dicts(c.list_topics(namespace)), TOPIC_COLUMNS)


@topic_app.command("stats")
def topic_stats(name: Name) -> None:
    """Per-queue min/max offsets and last store time."""
    with _client() as c:
        stats = c.topic_stats(name)
        _show(
            _dicts(stats.queues), ("queue_id", "min_offset", "max_offset", "last_store_time_ms"), title=name
        )


@group_app.command("create")
def group_create(
    name: Name,
    fifo: Annotated[bool, typer.Option("--fifo")] = False,
    max_attempts: Annotated[int, typer.Option("--max-delivery-attempts")] = 0,
    broadcast: Annotated[bool, typer.Option("--broadcast")] = False,
    namespace: Annotated[str, typer.Option("--namespace")] = "",
    retry_delays_ms: Annotated[str, typer.Option("--retry-delays-ms", help="comma-separated delays")] = "",
) -> None:
    """Create a consumer group."""
    delays = [int(d) for d in retry_delays_ms.split(",") if d.strip()] or None
    with _client() as c:
        group = c.create_group(
            name,
            fifo=fifo,
            max_delivery_attempts=max_attempts,
            broadcast=broadcast,
            namespace=namespace,
            retry_delays_ms=delays,
        )
        _show(_dicts([group]), GROUP_COLUMNS)


@group_app.command("update")
def group_update(
    name: Name,
    fifo: Annotated[bool | None, typer.Option("--fifo/--no-fifo")] = None,
    max_attempts: Annotated[int | None, typer.Option("--max-delivery-attempts")] = None,
    broadcast: Annotated[bool | None, typer.Option("--broadcast/--no-broadcast")] = None,
    retry_delays_ms: Annotated[str, typer.Option("--retry-delays-ms")] = "",
) -> None:
    """Change a consumer group (only the options given)."""
    delays = [int(d) for d in retry_delays_ms.split(",") if d.strip()] or None
    with _client() as c:
        group = c.update_group(
            name, fifo=fifo, max_delivery_attempts=max_attempts, broadcast=broadcast, retry_delays_ms=delays
        )
        _show(_dicts([group]), GROUP_COLUMNS)


@group_app.command("delete")
def group_delete(name: Name) -> None:
    """Delete a consumer group with its positions, in-flight messages and committed offsets."""
    from cli.output import success

    with _client() as c:
        c.delete_group(name)
    success(f"group {name} deleted")


@group_app.command("list")
def group_list(namespace: Annotated[str, typer.Option("--namespace")] = "") -> None:
    """List consumer groups."""
    with _client() as c:
        _show(_dicts(c.list_groups(namespace)), GROUP_COLUMNS)


@group_app.command("stats")
def group_stats(name: Name, topic: Annotated[str, typer.Option("--topic")] = "") -> None:
    """Committed offset, lag (messages and ms) and in-flight count per topic queue."""
    with _client() as c:
        stats = c.group_stats(name, topic)
        _show(
            _dicts(stats.queues),
            ("topic", "queue_id", "committed_offset", "max_offset", "lag_messages", "lag_ms", "in_flight"),
            title=name,
        )


@app.command("clients")
def clients(
    namespace: Annotated[str, typer.Option("--namespace")] = "",
    group: Annotated[str, typer.Option("--group")] = "",
) -> None:
    """Clients connected to the broker."""
    with _client() as c:
        _show(
            _dicts(c.list_clients(namespace, group)),
            ("client_id", "language", "version", "address", "client_type", "group", "last_heartbeat_ms"),
        )


def _register_security_commands() -> None:
    # imported here: admin_security imports this module's helpers
    from cli.commands.admin_security import acl_app, key_app, quota_app

    app.add_typer(key_app, name="key")
    app.add_typer(acl_app, name="acl")
    app.add_typer(quota_app, name="quota")


_register_security_commands()
