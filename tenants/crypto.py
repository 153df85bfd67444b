"""Encryption at rest of access-key secrets (Fernet).

The key is ``MQ_SECRETS_KEY`` (a Fernet key) when set, else derived from ``SECRET_KEY`` with HKDF.
Secrets written under the derived key stay readable after ``MQ_SECRETS_KEY`` is introduced: the
derived key is kept as a decrypt-only fallback (MultiFernet).
"""

from __future__ import annotations

import base64
import os
from functools import lru_cache

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from tenants.constants import SECRETS_HKDF_INFO

__all__ = ("decrypt_secret", "encrypt_secret", "secrets_cipher")

SECRETS_KEY_ENV = "MQ_SECRETS_KEY"


def _derived_key(secret_key: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SECRETS_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


@lru_cache(maxsize=4)
def _cipher(configured: str | None, secret_key: str) -> MultiFernet:
    keys = [Fernet(configured.encode())] if configured else []
    keys.append(Fernet(_derived_key(secret_key)))
    return MultiFernet(keys)


def secrets_cipher() -> MultiFernet:
    """The cipher for the current settings (cached per key material)."""
    configured = getattr(settings, "MQ_SECRETS_KEY", None) or os.environ.get(SECRETS_KEY_ENV) or None
    return _cipher(configured, str(settings.SECRET_KEY))


def encrypt_secret(secret: str) -> bytes:
    return secrets_cipher().encrypt(secret.encode())


def decrypt_secret(token: bytes | memoryview) -> str:
    return secrets_cipher().decrypt(bytes(token)).decode()
