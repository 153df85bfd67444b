"""``mqctl message``: produce and consume with the SDK on the broker; look messages up via the API.

send, send-file, consume/tail talk to the broker directly (see cli/messaging.py for the endpoint and
key); get, query and trace ask the control plane, which reads the brokers' indexes.
"""

from __future__ import annotations

import base64
import sys
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.commands.message_lookup import get, query, topic_path, trace
from cli.errors import CliError, ExitCode
from cli.messaging import (
    AccessKeyOpt,
    EndpointOpt,
    SecretKeyOpt,
    client_config,
    message_line,
    message_record,
)
from cli.options import Output, Tenant
from cli.session import current

if TYPE_CHECKING:
    from concurrent.futures import Future

    from mqcloud import Message, SendReceipt

__all__ = ("app",)

app = typer.Typer(
    no_args_is_help=True,
    help="Messages: send, send-file, consume (tail) live; get, query, trace through the control plane.",
)

Topic = Annotated[str, typer.Argument(help="Topic name (tenant-relative).")]
Tag = Annotated[str | None, typer.Option("--tag", help="Message tag (consumers filter on it).")]
Keys = Annotated[list[str] | None, typer.Option("--key", "-k", help="Message key (indexed); repeatable.")]
Props = Annotated[list[str] | None, typer.Option("--property", "-p", help="NAME=VALUE; repeatable.")]
MessageGroup = Annotated[
    str | None,
    typer.Option("--message-group", help="FIFO message group (same group = same queue, in order)."),
]
Delay = Annotated[float | None, typer.Option("--delay", min=0, help="Deliver after this many seconds.")]
DeliverAt = Annotated[
    str | None,
    typer.Option("--deliver-at", help="Deliver at this ISO-8601 time (e.g. 2026-01-31T12:00:00Z)."),
]
SEND_WINDOW = 64  # sends in flight in send-file: enough to hide the round trip, bounded memory


def _properties(pairs: list[str] | None) -> dict[str, str]:
    props: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--property wants NAME=VALUE, got {pair!r}", ExitCode.USAGE)
        props[name] = value
    return props


def _delivery(delay: float | None, deliver_at: str | None) -> float | None:
    if delay is not None and deliver_at is not None:
        raise CliError("give --delay or --deliver-at, not both", ExitCode.USAGE)
    if delay is not None:
        return time.time() + delay
    if deliver_at is not None:
        try:
            when = datetime.fromisoformat(deliver_at)
        except ValueError as exc:
            raise CliError(f"--deliver-at: not an ISO-8601 time: {deliver_at!r}", ExitCode.USAGE) from exc
        if when.tzinfo is None:
            raise CliError("--deliver-at needs a time zone, e.g. 2026-01-31T12:00:00Z", ExitCode.USAGE)
        return when.timestamp()
    return None


def _message(
    topic: str,
    body: bytes,
    tag: str | None,
    keys: list[str] | None,
    props: list[str] | None,
    group: str | None,
    delivery: float | None,
) -> Message:
    from mqcloud import Message

    try:
        return Message(
            topic,
            body,
            tag=tag,
            keys=list(keys or []),
            properties=_properties(props),
            message_group=group,
            delivery_timestamp=delivery,
        )
    except ValueError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from exc


def _receipt(topic: str, r: SendReceipt) -> dict[str, Any]:
    row: dict[str, Any] = {
        "message_id": r.message_id,
        "topic": topic,
        "queue_id": r.queue_id,
        "offset": r.offset,
        "endpoint": r.endpoint,
    }
    if r.transaction_id:
        row["transaction_id"] = r.transaction_id
    if r.recall_handle:
        row["recall_handle"] = r.recall_handle
    return row


@app.command("send")
def send(
    topic: Topic,
    body: Annotated[str | None, typer.Argument(help="The body; '-' or nothing reads stdin.")] = None,
    tenant: Tenant = None,
    tag: Tag = None,
    key: Keys = None,
    prop: Props = None,
    message_group: MessageGroup = None,
    delay: Delay = None,
    deliver_at: DeliverAt = None,
    via_api: Annotated[
        bool,
        typer.Option("--via-api", help="Send through the control plane (no broker endpoint or key needed)."),
    ] = False,
    endpoint: EndpointOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Send one message and print its receipt (message id, queue, offset).

    \b
    Examples:
      mqctl message send orders '{"id": 1}' --tag created --key order-1
      mqctl message send orders 'step 1' --message-group order-1
      mqctl message send reminders 'ping' --delay 60
      echo hello | mqctl message send orders -
    """
    from mqcloud import Producer

    if body is None or body == "-":
        if sys.stdin.isatty():
            raise CliError("no body: give it as an argument or pipe it on stdin", ExitCode.USAGE)
        data = typer.get_binary_stream("stdin").read()
    else:
        data = body.encode()
    if not data:
        raise CliError("the body is empty", ExitCode.USAGE)
    ns = current().tenant(tenant)
    delivery = _delivery(delay, deliver_at)
    message = _message(topic, data, tag, key, prop, message_group, delivery)
    if via_api:
        output.emit(_send_via_api(ns, topic, message), fmt)
        return
    with Producer(client_config(ns, endpoint, access_key, secret_key), topics=[topic]) as producer:
        receipt = producer.send(message)
    output.emit(_receipt(topic, receipt), fmt)


@app.command("recall")
def recall(
    topic: Topic,
    recall_handle: Annotated[str, typer.Argument(help="The recall_handle that `message send` printed.")],
    tenant: Tenant = None,
    endpoint: EndpointOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Cancel a delay message before its delivery time (exit 3 once it was delivered).

    \b
    Examples:
      mqctl message send reminders 'ping' --delay 3600 -o json   # prints recall_handle
      mqctl message recall reminders "$HANDLE"
    """
    from mqcloud import Producer

    ns = current().tenant(tenant)
    with Producer(client_config(ns, endpoint, access_key, secret_key), topics=[topic]) as producer:
        message_id = producer.recall(topic, recall_handle)
    output.emit({"message_id": message_id, "topic": topic, "recalled": True}, fmt)


def _send_via_api(ns: str, topic: str, message: Message) -> dict[str, Any]:
    """POST the message to the control plane's test-send endpoint; its answer plus the topic."""
    body: dict[str, Any] = {"body_base64": base64.b64encode(message.body).decode("ascii")}
    if message.tag is not None:
        body["tag"] = message.tag
    if message.keys:
        body["keys"] = list(message.keys)
    if message.properties:
        body["properties"] = dict(message.properties)
    if message.message_group is not None:
        body["message_group"] = message.message_group
    if message.delivery_timestamp is not None:
        when = datetime.fromtimestamp(message.delivery_timestamp, UTC)
        body["delivery_time"] = when.isoformat().replace("+00:00", "Z")
    sent: dict[str, Any] = current().api().post(f"{topic_path(ns, topic)}messages/", body)
    return {**sent, "topic": topic}


def _file_bodies(path: Path, whole: bool) -> list[bytes]:
    """The bodies to send: the whole file, or each line that is not blank."""
    if str(path) == "-":
        data = typer.get_binary_stream("stdin").read()
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}", ExitCode.USAGE) from exc
    if whole:
        return [data]
    return [line for line in data.splitlines() if line.strip()]


@app.command("send-file")
def send_file(
    topic: Topic,
    path: Annotated[Path, typer.Argument(help="File to send ('-' for stdin).", allow_dash=True)],
    whole: Annotated[
        bool, typer.Option("--whole", help="Send the file as one message, not one per line.")
    ] = False,
    tenant: Tenant = None,
    tag: Tag = None,
    key: Keys = None,
    prop: Props = None,
    message_group: MessageGroup = None,
    endpoint: EndpointOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Send each non-empty line of a file as a message (or --whole), with a progress bar.

    \b
    Examples:
      mqctl message send-file orders orders.jsonl --tag import
      mqctl message send-file images cat.png --whole
    """
    from mqcloud import Producer

    ns = current().tenant(tenant)
    bodies = _file_bodies(path, whole)
    if not bodies:
        raise CliError(f"{path} has nothing to send", ExitCode.USAGE)
    messages = [_message(topic, b, tag, key, prop, message_group, None) for b in bodies]
    ids: list[str] = []
    with (
        Producer(client_config(ns, endpoint, access_key, secret_key), topics=[topic]) as producer,
        output.progress(f"sending to {ns}/{topic}", total=len(messages)) as (bar, task),
    ):
        pending: deque[Future[SendReceipt]] = deque()

        def settle_one() -> None:
            ids.append(pending.popleft().result().message_id)
            bar.advance(task)

        try:
            for message in messages:
                pending.append(producer.send_async(message))
                if len(pending) >= SEND_WINDOW:
                    settle_one()
            while pending:
                settle_one()
        except Exception:
            output.error(f"stopped after {len(ids)} of {len(messages)} messages")
            raise
    summary = {"topic": topic, "sent": len(ids), "message_ids": ids}
    if fmt is output.OutputFormat.TABLE:
        output.success(f"sent {len(ids)} message(s) to {ns}/{topic}")
    else:
        output.emit(summary, fmt)


ConsumeGroup = Annotated[str, typer.Option("--group", "-g", help="Consumer group to receive as.")]
TagExpr = Annotated[str, typer.Option("--tag", help="Tag filter, e.g. 'created||paid'.")]
Sql = Annotated[str | None, typer.Option("--sql", help="SQL92 filter on properties instead of --tag.")]
MaxMessages = Annotated[int, typer.Option("--max", min=0, help="Stop after N messages (0: never).")]
IdleTimeout = Annotated[
    float,
    typer.Option("--idle-timeout", min=0, help="Stop after this many seconds without a message (0: never)."),
]
Invisible = Annotated[
    float,
    typer.Option("--invisible-seconds", min=1, help="How long a received message is hidden from others."),
]
NoAck = Annotated[
    bool, typer.Option("--no-ack", help="Do not acknowledge: messages come back after --invisible-seconds.")
]


def consume(
    topic: Topic,
    group: ConsumeGroup,
    tenant: Tenant = None,
    tag: TagExpr = "*",
    sql: Sql = None,
    max_messages: MaxMessages = 0,
    idle_timeout: IdleTimeout = 0,
    invisible_seconds: Invisible = 30,
    no_ack: NoAck = False,
    endpoint: EndpointOpt = None,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
    fmt: Output = output.OutputFormat.TABLE,
) -> None:
    """Receive and print messages live (acknowledging them) until Ctrl-C, --max or --idle-timeout.

    With -o json each message is one JSON object per line. ``tail`` is the same command.

    \b
    Examples:
      mqctl message consume orders --group billing
      mqctl message consume orders -g billing --tag 'created||paid' --max 10 -o json
      mqctl message tail orders -g billing --sql "region = 'eu'" --idle-timeout 5
    """
    from mqcloud import FilterExpression, SimpleConsumer

    ns = current().tenant(tenant)
    expression: FilterExpression | str = FilterExpression.sql92(sql) if sql else tag
    poll = min(idle_timeout, 20.0) if idle_timeout > 0 else 20.0
    config = client_config(ns, endpoint, access_key, secret_key)
    count = 0
    with SimpleConsumer(config, group, {topic: expression}, await_duration=poll) as consumer:
        output.info(f"consuming {ns}/{topic} as group {group}; Ctrl-C stops")
        last = time.monotonic()
        try:
            while not (max_messages and count >= max_messages):
                batch = consumer.receive(
                    min(32, max_messages - count) if max_messages else 32, invisible_seconds
                )
                if not batch:
                    if idle_timeout > 0 and time.monotonic() - last >= idle_timeout:
                        break
                    continue
                last = time.monotonic()
                for i, m in enumerate(batch):
                    if max_messages and count >= max_messages:
                        for rest in batch[i:]:  # not shown: hand them back at once
                            consumer.change_invisible_duration(rest, 0)
                        break
                    record = message_record(m)
                    output.emit_record(record, fmt, message_line(record))
                    if not no_ack:
                        consumer.ack(m)
                    count += 1
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a live consumer ends: exit 0
    output.info(f"{count} message(s) received")


app.command("consume")(consume)
app.command("tail", help="Same as consume: follow a topic live, printing messages until Ctrl-C.")(consume)
app.command("get")(get)
app.command("query")(query)
app.command("trace")(trace)
