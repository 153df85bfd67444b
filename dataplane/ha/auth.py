"""Replication-port authentication: an HMAC-SHA256 challenge-response with the group's shared secret.

Before anything else on a replication connection (framing.py)::

    master  -> replica  CHALLENGE  SERVER NONCE (32 random bytes)
    replica -> master   AUTH       CLIENT NONCE (32 random bytes) | PROOF (32)
    master  -> replica  AUTH_OK    PROOF (32)

    replica proof = HMAC-SHA256(key, "mqcloud-ha-v1|replica|" + group + "|" + server + client)
    master proof  = HMAC-SHA256(key, "mqcloud-ha-v1|master|"  + group + "|" + server + client)

Both sides compare with :func:`hmac.compare_digest`. The master sends no CommitLog byte, epoch or
metadata to a peer that has not proven the secret; the replica applies nothing from a master that has
not proven it (the role string keeps one side's proof from being replayed as the other's). Fresh
nonces on both sides keep a recorded exchange from being replayed.

The key is ``ha_secret``; without one it is derived from the operator's ``admin_token`` (every node
of a deployment shares it); development mode without either uses a fixed development key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Final

__all__ = (
    "DEV_KEY",
    "NONCE_BYTES",
    "PROOF_BYTES",
    "AuthError",
    "master_proof",
    "new_nonce",
    "replica_proof",
    "replication_key",
    "verify",
)

NONCE_BYTES: Final = 32
PROOF_BYTES: Final = 32
_LABEL: Final = b"mqcloud-ha-v1|"
# Development mode only: a known key, so dev nodes interoperate; it keeps out accidental peers,
# not attackers.
DEV_KEY: Final = hashlib.sha256(b"mqcloud development replication key").digest()


class AuthError(Exception):
    """The peer did not prove the replication secret (or the broker has none configured)."""


def replication_key(ha_secret: str | None, admin_token: str | None, dev_mode: bool) -> bytes:
    """The HMAC key of a node: ``ha_secret``, else derived from ``admin_token``, else DEV_KEY in
    development mode; AuthError when none applies."""
    if ha_secret:
        return hashlib.sha256(b"mqcloud-ha-secret|" + ha_secret.encode()).digest()
    if admin_token:
        return hmac.digest(admin_token.encode(), b"mqcloud-ha-secret", "sha256")
    if dev_mode:
        return DEV_KEY
    raise AuthError(
        "the replication port needs a shared secret: set MQ_BROKER_HA_SECRET (the same on every node "
        "of the group) or MQ_BROKER_ADMIN_TOKEN, or run in development mode (--dev)"
    )


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def _proof(key: bytes, role: bytes, group: str, server: bytes, client: bytes) -> bytes:
    return hmac.digest(key, _LABEL + role + b"|" + group.encode() + b"|" + server + client, "sha256")


def replica_proof(key: bytes, group: str, server: bytes, client: bytes) -> bytes:
    return _proof(key, b"replica", group, server, client)


def master_proof(key: bytes, group: str, server: bytes, client: bytes) -> bytes:
    return _proof(key, b"master", group, server, client)


def verify(expected: bytes, received: bytes) -> bool:
    """Constant-time comparison (the length is not secret)."""
    return hmac.compare_digest(expected, received)
