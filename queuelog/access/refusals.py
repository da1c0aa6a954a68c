"""Refusals: a request the domain will not carry out, said as a code and its parameters.

One pattern serves every refusal: ``Refused`` carries a ``code`` (a ``StrEnum`` member) saying why, the
``field`` to blame when one is, and ``params`` (a limit, the allowed names, a job id...). Nothing ever
matches on an exception's text: each face words the code itself. The JSON API maps it to a status, a
problem type and an English detail (``queuelog.api.refusals``), the pages to a translated message beside
the field (``queuelog.web.refusals``), the command line to its own words (``queuelog.cli``). This module
holds the base and the codes about users, passwords and API keys; ``queuelog.queue.errors`` those about
jobs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

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


class Refused(Exception):
    """A refusal: ``code`` says why, ``field`` names the input to blame (None: the request as a whole),
    ``params`` fill in each face's words. ``message`` is English for logs and tracebacks only; without one,
    the text is the code and its parameters."""

    def __init__(self, code: StrEnum, message: str = "", *, field: str | None = None, **params: Any) -> None:
        super().__init__(message or _summary(code, field, params))
        self.code = code
        self.field = field
        self.params = params


def _summary(code: StrEnum, field: str | None, params: dict[str, Any]) -> str:
    parts = [f"{field}: " if field else "", code.value]
    if params:
        parts.append(" (" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + ")")
    return "".join(parts)


class AuthError(Refused, ValueError):
    """A management request about users, passwords or keys that cannot be carried out. Its message is the
    command line's English words (where ``queuelog.cli`` has none of its own)."""

    code: Refusal

    def __init__(self, code: Refusal, message: str, **params: str) -> None:
        super().__init__(code, message, **params)


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
