"""Alert webhooks reach public addresses only, checked on the address the POST goes to (DNS rebinding)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpcore
import pytest

from tenants.services.webhook_post import WebhookUnreachable, post, public_address

PUBLIC = "93.184.216.34"


class Receiver:
    """A real HTTP server on loopback that records every POST."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def test_posts_the_exact_body_and_headers(receiver: Receiver) -> None:
    status = post(
        f"http://127.0.0.1:{receiver.port}/hook",
        b'{"alert":"x"}',
        {"Content-Type": "application/json", "X-Sig": "sha256=ab"},
        5,
        public_only=False,
    )
    assert status == 204
    [(headers, body)] = receiver.received
    assert body == b'{"alert":"x"}'
    assert headers["X-Sig"] == "sha256=ab" and headers["Host"] == f"127.0.0.1:{receiver.port}"


def test_loopback_is_refused_before_anything_is_sent(receiver: Receiver) -> None:
    with pytest.raises(WebhookUnreachable, match=r"not a public address \(127\.0\.0\.1\)"):
        post(f"http://127.0.0.1:{receiver.port}/hook", b"{}", {}, 5)
    assert receiver.received == []


def test_a_name_that_rebinds_to_loopback_is_never_connected_to_it(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a name whose first answer is public and every later one loopback (DNS rebinding)
    answers: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.rebind.test":
            return real(host, port, *args, **kwargs)
        address = PUBLIC if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    # and a machine without a route out: record where the connection goes instead of making it
    connected: list[str] = []

    def no_route(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        connected.append(host)
        if host == "127.0.0.1":  # what a second lookup of the name would give: let it through
            return real_connect(self, host, port, *args, **kwargs)
        raise httpcore.ConnectError("no route to host")

    real_connect = httpcore.SyncBackend.connect_tcp
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", no_route)
    # when the webhook is posted
    with pytest.raises(WebhookUnreachable, match="could not be reached"):
        post(f"http://hooks.rebind.test:{receiver.port}/hook", b"{}", {}, 5)
    # then the one connection went to the address that was checked, resolved once
    assert answers == [PUBLIC]
    assert connected == [PUBLIC]
    assert receiver.received == []


def test_every_address_of_a_name_must_be_public(monkeypatch: pytest.MonkeyPatch) -> None:
    def mixed(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    with pytest.raises(httpcore.ConnectError, match=r"not a public address \(10\.0\.0\.7\)"):
        public_address("hooks.mixed.test", 443)


def test_an_unresolvable_name_says_so() -> None:
    with pytest.raises(WebhookUnreachable, match="does not resolve"):
        post("http://no-such-host.invalid/hook", b"{}", {}, 5)
