"""The official clients against a broker without development mode: signed requests work, a wrong
secret is refused, and TLS works with the clients' TLS switch and a test CA (issue 7)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.integration.broker.conftest import REPO_ROOT
from tests.interop.conftest import NAMESPACE, make_interop

pytestmark = [pytest.mark.interop, pytest.mark.integration, pytest.mark.slow]

TOKEN = "interop-operator-token"
AK, SECRET = "AKinterop", "interop-secret"
OTHER_AK, OTHER_SECRET = "AKintruder", "intruder-secret"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_test_ca(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("mqcloud test CA"))
        .issuer_name(_name("mqcloud test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def _settled(output: list[str], quiet_s: float = 0.3, timeout_s: float = 5.0) -> int:
    """How many lines ``output`` holds once no line came for ``quiet_s``: the broker's lines about a
    client run (read by another thread) are all in, neither missed nor counted as the next run's."""
    deadline = time.monotonic() + timeout_s
    count = len(output)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        if len(output) == count:
            break
        count = len(output)
    return count


def test_official_clients_sign_and_a_wrong_secret_is_refused(
    py_client: Path, node_client: Path, tmp_path: Path
) -> None:
    env = make_interop(py_client, node_client, tmp_path, token=TOKEN)
    try:
        env.admin.put_access_key(AK, secret_key=SECRET, namespace=NAMESPACE)
        topic, group = env.topic(), env.group()
        for lang in ("py", "node"):
            # the right secret: produce and consume work
            sent = env.run(lang, "produce", topic, count=3, prefix=f"{lang}-ok", credentials=(AK, SECRET))
            assert len(sent["sent"]) == 3
            # a wrong secret (and no credentials at all) is refused
            for creds, reason in (
                ((AK, "wrong-secret"), "signature mismatch"),
                (None, "credentials required"),
            ):
                logged = _settled(env.broker.output)
                proc = env.run_raw(lang, "produce", topic, count=1, timeout=15, credentials=creds)
                assert proc.returncode != 0, (lang, creds, proc.stdout[-500:])
                # the broker answered UNAUTHORIZED, and says why (the clients hide the code)
                end = _settled(env.broker.output)  # this run's lines are in too
                refusals = [ln for ln in env.broker.output[logged:end] if "QueryRoute refused" in ln]
                assert refusals and all(reason in ln for ln in refusals), env.broker.output[logged:]
        # another tenant's key (right secret) naming this namespace is FORBIDDEN, on produce and
        # consume, and takes nothing away
        env.admin.put_access_key(OTHER_AK, secret_key=OTHER_SECRET, namespace="intruder")
        for lang, mode in (("py", "produce"), ("node", "produce"), ("py", "simple"), ("node", "simple")):
            logged = _settled(env.broker.output)
            proc = env.run_raw(
                lang, mode, topic, group, count=1, timeout=15, credentials=(OTHER_AK, OTHER_SECRET)
            )
            assert proc.returncode != 0 or '"received": []' in proc.stdout, (lang, mode, proc.stdout[-500:])
            end = _settled(env.broker.output)
            refusals = [ln for ln in env.broker.output[logged:end] if " refused: " in ln]
            assert refusals and all("belongs to namespace 'intruder'" in ln for ln in refusals), (
                lang,
                mode,
                env.broker.output[logged:],
            )
        got = env.run("py", "simple", topic, group, count=6, timeout=30, credentials=(AK, SECRET))
        assert sorted(m["body"] for m in got["received"]) == sorted(
            [f"py-ok-{i}" for i in range(3)] + [f"node-ok-{i}" for i in range(3)]
        )
    finally:
        env.admin.close()
        env.broker.kill()


def test_tls_with_the_official_python_client_and_our_sdk(
    py_client: Path, node_client: Path, tmp_path: Path
) -> None:
    ca, cert, key = make_test_ca(tmp_path)
    env = make_interop(
        py_client,
        node_client,
        tmp_path,
        token=TOKEN,
        env={"MQ_BROKER_TLS_CERT_FILE": str(cert), "MQ_BROKER_TLS_KEY_FILE": str(key)},
        ca=ca,
    )
    roots = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca)}
    try:
        env.admin.put_access_key(AK, secret_key=SECRET, namespace=NAMESPACE)  # the admin API over TLS
        topic, group = env.topic(), env.group()
        # the official Python client with tls_enable=True trusts the test CA through the env var
        sent = env.run(
            "py", "produce", topic, count=3, prefix="tls", credentials=(AK, SECRET), tls=True, env=roots
        )
        assert len(sent["sent"]) == 3
        # plaintext against the TLS port fails
        proc = env.run_raw("py", "produce", topic, count=1, timeout=10, credentials=(AK, SECRET))
        assert proc.returncode != 0
        # our SDK with tls=True receives them (in a subprocess: grpc reads the roots once per process)
        script = (
            "import sys\n"
            "from mqcloud import ClientConfig, Credentials, SimpleConsumer\n"
            f"cfg = ClientConfig({env.broker.target!r}, credentials=Credentials({AK!r}, {SECRET!r}), "
            f"namespace={NAMESPACE!r}, tls=True)\n"
            "got = []\n"
            f"with SimpleConsumer(cfg, {group!r}, {{{topic!r}: '*'}}, await_duration=2) as c:\n"
            "    for _ in range(10):\n"
            "        for m in c.receive(16, 30):\n"
            "            c.ack(m); got.append(m.body.decode())\n"
            "        if len(got) >= 3: break\n"
            "print(sorted(got))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO_ROOT,
            env={**os.environ, **roots},
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip().splitlines()[-1] == str(sorted(f"tls-{i}" for i in range(3)))
    finally:
        env.admin.close()
        env.broker.kill()


def test_tls_with_the_official_nodejs_client(py_client: Path, node_client: Path, tmp_path: Path) -> None:
    ca, cert, key = make_test_ca(tmp_path)
    env = make_interop(
        py_client,
        node_client,
        tmp_path,
        token=TOKEN,
        env={"MQ_BROKER_TLS_CERT_FILE": str(cert), "MQ_BROKER_TLS_KEY_FILE": str(key)},
        ca=ca,
    )
    roots = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca)}  # read by @grpc/grpc-js for createSsl()
    creds = (AK, SECRET)
    try:
        env.admin.put_access_key(AK, secret_key=SECRET, namespace=NAMESPACE)
        topic, group = env.topic(), env.group()
        # the official Node.js client with sslEnabled: true sends and receives over TLS
        sent = env.run(
            "node", "produce", topic, count=3, prefix="node-tls", credentials=creds, tls=True, env=roots
        )
        assert len(sent["sent"]) == 3
        got = env.run(
            "node", "simple", topic, group, count=3, timeout=30, credentials=creds, tls=True, env=roots
        )
        assert sorted(m["body"] for m in got["received"]) == [f"node-tls-{i}" for i in range(3)]
        assert {m["message_id"] for m in got["received"]} == {m["message_id"] for m in sent["sent"]}
        # without the switch (plaintext against the TLS port) it cannot even fetch a route
        proc = env.run_raw("node", "produce", topic, count=1, timeout=10, credentials=creds)
        assert proc.returncode != 0 and "Failed to fetch topic routes" in proc.stderr, proc.stderr[-1500:]
        # with the switch but without the test CA the server's certificate is not trusted
        proc = env.run_raw("node", "produce", topic, count=1, timeout=10, credentials=creds, tls=True)
        assert proc.returncode != 0 and "Failed to fetch topic routes" in proc.stderr, proc.stderr[-1500:]
    finally:
        env.admin.close()
        env.broker.kill()
