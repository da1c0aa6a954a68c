"""Redaction of secrets in worker error text (SPEC V-10), applied before anything is stored."""

from __future__ import annotations

import re

MASK = "[REDACTED]"

# Order matters: whole PEM blocks first, then patterns that are more specific than the generic ones.
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        MASK,
    ),
    # user:password@host in any URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(@)"), r"\1" + MASK + r"\2"),
    # Authorization: Bearer/Basic credentials
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1\2" + MASK),
    # our own API keys, wherever they appear
    (re.compile(r"\bql_[A-Za-z0-9_-]{16,}"), MASK),
    # AWS access key ids
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), MASK),
    # key=value and "key": "value" forms for secret-looking names (db_password=..., "client_secret": ...);
    # the name must start with the secret word or have it after _ or -, so that "SMTPAuthError: login
    # failed" or "PasswordPolicyError: too short" keep their messages.
    (
        re.compile(
            r"""(?ix)
            (\b(?:[\w.]*[_-])?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|
                private[_-]?key|credentials?|client[_-]?secret|session[_-]?id)
             ["']?\s*[:=]\s*["']?)
            ([^\s"'&,;}]+)
            """
        ),
        r"\1" + MASK,
    ),
]


def redact_error(text: str) -> str:
    """Return ``text`` with passwords, tokens, keys and similar secrets replaced by ``[REDACTED]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
