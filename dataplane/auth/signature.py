"""``MQv2-HMAC-SHA1`` request signatures, as RocketMQ 5 clients send them (see PROTOCOL.md §5).

``authorization: MQv2-HMAC-SHA1 Credential=AK[/...], SignedHeaders=x-mq-date-time, Signature=HEX``
with ``Signature = hex(HMAC-SHA1(secret, value of x-mq-date-time))``. Python prints the hex in
lower case, Node and Java in upper case: the hex is decoded and the bytes compared in constant time.
No clock-skew check: several official clients put *local* time with a literal ``Z``.
"""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import hmac

__all__ = ("ALGORITHM", "AuthorizationHeader", "SignatureError", "parse_authorization", "verify_signature")

ALGORITHM = "MQv2-HMAC-SHA1"


class SignatureError(Exception):
    """The authorization header is malformed or its signature does not match."""


@dataclasses.dataclass(slots=True, frozen=True)
class AuthorizationHeader:
    access_key: str  # "" when the client sent no credentials (``Credential=``)
    signed_headers: str
    signature: str


def parse_authorization(value: str) -> AuthorizationHeader:
    """Split as RocketMQ does: algorithm up to the first space, then ``k=v`` items split on ``,``."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError(f"unsupported authorization algorithm {algorithm[:32]!r}")
    items: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if sep:
            items[key.strip()] = val.strip()
    credential = items.get("Credential")
    if credential is None:
        raise SignatureError("authorization header has no Credential")
    return AuthorizationHeader(
        access_key=credential.partition("/")[0],
        signed_headers=items.get("SignedHeaders", ""),
        signature=items.get("Signature", ""),
    )


def verify_signature(secret: str, date_time: str, signature_hex: str) -> bool:
    """Whether ``signature_hex`` (either case) is HMAC-SHA1(secret, date_time)."""
    try:
        given = binascii.unhexlify(signature_hex)
    except (binascii.Error, ValueError):
        return False
    expected = hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(given, expected)
