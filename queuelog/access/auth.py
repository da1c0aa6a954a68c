"""Access: password hashes, API keys as secrets (made, hashed, told apart from garbage). Who the users and
keys are, and every change to them, is stored by the admin store (queuelog/queue/admin.py); what each
principal may do is on ``Principal`` (queuelog/queue/principal.py)."""

from __future__ import annotations

import hashlib
import secrets
from functools import cache

from werkzeug.security import check_password_hash, generate_password_hash

from queuelog.access.refusals import AlreadyExists, AuthError, Refusal

KEY_PREFIX = "ql_"
KEY_MAX_LENGTH = 128  # longer than any key made here: refused before it is hashed

__all__ = [
    "KEY_PREFIX",
    "AlreadyExists",
    "AuthError",
    "Refusal",
    "hash_key",
    "hash_password",
    "key_digest",
    "new_key",
    "password_matches",
]


# -- passwords ------------------------------------------------------------------------------------------


def hash_password(password: str, method: str = "scrypt") -> str:
    """A salted hash of ``password`` through Werkzeug: slow scrypt unless ``method`` (the database's, from
    QUEUELOG_PASSWORD_HASH) says otherwise. The hash names its method, so hashes made under an earlier
    setting still check."""
    return generate_password_hash(password, method)


def password_matches(password_hash: str | None, password: str, method: str = "scrypt") -> bool:
    """Whether ``password`` is the one ``password_hash`` was made from. With no hash (an unknown user) a
    hash of the same method is checked all the same and the answer is False: both failures take as long,
    so timing tells no one which usernames exist."""
    if password_hash is None:
        check_password_hash(_dummy_hash(method), password)
        return False
    return check_password_hash(password_hash, password)


@cache
def _dummy_hash(method: str) -> str:
    """Made at the first use rather than at import: a scrypt hash costs start-up a tenth of a second."""
    return hash_password("not a password", method)


# -- API keys -------------------------------------------------------------------------------------------


def new_key() -> str:
    """A new API key: the prefix and 256 random bits. Only its hash is ever stored."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw: str) -> str:
    """The stored form of a key. The key has 256 random bits, so no slow hash is needed."""
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def key_digest(raw: str) -> str | None:
    """The hash to look ``raw`` up by, or None when it cannot be a key of ours (no lookup then)."""
    if not raw.startswith(KEY_PREFIX) or len(raw) > KEY_MAX_LENGTH:
        return None
    return hash_key(raw)
