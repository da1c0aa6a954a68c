"""Why a management request (users, passwords, API keys) was refused.

Each refusal carries a ``code``: the pages turn it into a translated message (``queuelog.web.refusals``)
and the command line words it itself. The exception's own message is English, for the command line and the
logs; nothing ever matches on its text.
"""

from __future__ import annotations

from enum import StrEnum

PASSWORD_MIN_LENGTH = 8
PASSWORD_MAX_LENGTH = 256


class Refusal(StrEnum):
    """The reasons a request about users, passwords or keys can be refused."""

    BAD_ROLE = "bad_role"
    BAD_USERNAME = "bad_username"
    USER_EXISTS = "user_exists"
    NO_SUCH_USER = "no_such_user"
    LAST_ADMIN = "last_admin"
    PASSWORD_TOO_SHORT = "password_too_short"
    PASSWORD_TOO_LONG = "password_too_long"
    PASSWORD_BLANK = "password_blank"
    BAD_KIND = "bad_kind"
    BAD_KEY_NAME = "bad_key_name"
    KEY_EXISTS = "key_exists"
    NO_SUCH_KEY = "no_such_key"
    PRODUCER_KEY_NEEDS_USER = "producer_key_needs_user"
    WORKER_KEY_HAS_USER = "worker_key_has_user"


class AuthError(ValueError):
    """A management request that cannot be carried out: ``code`` says why, ``params`` fill the message."""

    def __init__(self, code: Refusal, message: str, **params: str) -> None:
        super().__init__(message)
        self.code = code
        self.params = params


class AlreadyExists(AuthError):
    """The user or key name is taken."""


def check_password(password: str) -> None:
    """Refuse passwords shorter than 8 characters, longer than 256, or made of nothing but whitespace."""
    if not password.strip():
        raise AuthError(Refusal.PASSWORD_BLANK, "password must not be only whitespace")
    if len(password) < PASSWORD_MIN_LENGTH:
        raise AuthError(
            Refusal.PASSWORD_TOO_SHORT, f"password must be at least {PASSWORD_MIN_LENGTH} characters"
        )
    if len(password) > PASSWORD_MAX_LENGTH:
        raise AuthError(
            Refusal.PASSWORD_TOO_LONG, f"password must be at most {PASSWORD_MAX_LENGTH} characters"
        )
