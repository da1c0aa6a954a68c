"""Redaction of secrets in worker error text (README, Security, V-10), applied before anything is stored.

Each detector below returns ``(start, end)`` spans of the text; the spans are merged and each merged
span becomes ``[REDACTED]``. Every detector runs in time linear in the text, on any input: private key
blocks and URL passwords are found by hand with ``str.find``, and the regular expressions start at a
literal, bound the length of whatever precedes a fixed part, and use possessive quantifiers (or a
lookbehind that lets a run be scanned from its start only) where a run is followed by something else.
"""

from __future__ import annotations

import re

from queuelog.redact_commands import client_spans
from queuelog.redact_keys import MASK, Span, element_spans, flag_spans, key_value_spans, scheme_spans

__all__ = ["MASK", "redact_error"]

_BEGIN = "-----BEGIN "
_DASHES = "-----"

# Token shapes that are secrets wherever they appear. The lookbehinds after a prefix keep a match from
# starting inside a longer word (and, for JWTs, from rescanning a run from each of its positions).
_SHAPES = re.compile(
    r"""
    eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+  # JWT
    |ql_(?<![A-Za-z0-9_]ql_)[A-Za-z0-9_-]{16,}+                    # queuelog API key
    |(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)         # AWS access key id
     (?<![A-Za-z0-9]....)[A-Z0-9]{16}(?![A-Za-z0-9])
    |gh[pousr]_(?<![A-Za-z0-9]gh._)[A-Za-z0-9]{20,}+               # GitHub
    |github_pat_[A-Za-z0-9_]{20,}+
    |glpat-[A-Za-z0-9_-]{20,}+                                     # GitLab
    |xox[abprs]-(?<![A-Za-z0-9]xox.-)[A-Za-z0-9-]{10,}+            # Slack token
    |https://(?:hooks\.slack\.com/services/(?P<hook>[A-Za-z0-9/_-]++)  # Slack webhook: the path goes
     |(?:ptb\.|canary\.)?discord(?:app)?\.com/api/(?:v[0-9]{1,2}/)?webhooks/[0-9]{1,32}+/
      (?P<discord>[A-Za-z0-9_-]++))                                # Discord webhook: the id stays
    |sk_(?<![A-Za-z0-9_]sk_)(?:live|test)_[A-Za-z0-9]{10,}+        # Stripe secret key
    |rk_(?<![A-Za-z0-9_]rk_)(?:live|test)_[A-Za-z0-9]{10,}+        # Stripe restricted key
    |whsec_[A-Za-z0-9]{16,}+                                       # Stripe webhook secret
    |AIza[A-Za-z0-9_-]{35,}+                                       # Google API key
    |GOCSPX-[A-Za-z0-9_-]{20,}+|ya29\.[A-Za-z0-9_-]{20,}+          # Google OAuth secret, token
    |sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{20,}+                   # OpenAI, Anthropic
    |SG\.(?<![A-Za-z0-9_-]SG\.)[A-Za-z0-9_-]{16,}+\.[A-Za-z0-9_-]{16,}+  # SendGrid
    |npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])       # npm
    |hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}+                      # Hugging Face
    |pypi-(?<![A-Za-z0-9_-]pypi-)[A-Za-z0-9_-]{50,}+               # PyPI
    |:(?<=[0-9]:)(?P<telegram>AA[A-Za-z0-9_-]{32,33}+)(?![A-Za-z0-9_-])  # Telegram bot: the id stays
    """,
    re.X,
)

_URL_END = re.compile(r"""[\s"'<>`]""")
# The user name before the password in a URL: no "/", "?", "#" or space, at most 256 characters.
_USER = re.compile(r"[^:/?#\s]{0,256}+:")
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _pem_spans(text: str) -> list[Span]:
    """Private key blocks (PEM, OpenSSH, PGP): BEGIN to the matching END, or to the end if unterminated."""
    spans: list[Span] = []
    pos = 0
    while (begin := text.find(_BEGIN, pos)) >= 0:
        label_start = begin + len(_BEGIN)
        label_end = text.find(_DASHES, label_start, label_start + 80)
        if label_end < 0:
            pos = label_start
            continue
        label = text[label_start:label_end]
        pos = label_end + len(_DASHES)
        if "PRIVATE KEY" not in label and "SECRET KEY" not in label:
            continue
        end_marker = f"-----END {label}-----"
        end = text.find(end_marker, pos)
        if end < 0:
            spans.append((begin, len(text)))
            break
        pos = end + len(end_marker)
        spans.append((begin, pos))
    return spans


def _url_spans(text: str) -> list[Span]:
    """Passwords in URLs: ``scheme://user:password@host``, up to the last ``@`` of the URL.

    A password may hold ``/``, ``@`` and ``:``; the URL ends at whitespace, a quote or ``<``, ``>``.
    """
    spans: list[Span] = []
    pos = 0
    while (scheme := text.find("://", pos)) >= 0:
        found = _URL_END.search(text, scheme)
        pos = found.start() if found else len(text)
        at = text.rfind("@", scheme, pos)
        while 0 <= scheme < at:  # a URL may carry another in its query: try each "://" in turn
            user = _USER.match(text, scheme + 3, at)
            if user:
                spans.append((user.end(), at))
                break
            scheme = text.find("://", scheme + 3, at)
    return spans


def _shape_spans(text: str) -> list[Span]:
    """Tokens recognisable by their shape alone (see ``_SHAPES``); where a group is named, only it."""
    return [found.span(found.lastgroup or 0) for found in _SHAPES.finditer(text)]


def _ascii_lower(text: str) -> str:
    """``text`` with A-Z lowercased, of the same length (so that indices match ``text``)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def _masked(text: str, spans: list[Span]) -> str:
    """``text`` with each union of overlapping or touching spans replaced by one ``MASK``."""
    spans = sorted(span for span in spans if span[1] > span[0])
    if not spans:
        return text
    parts: list[str] = []
    done = 0
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start <= end:
            end = max(end, next_end)
            continue
        parts += (text[done:start], MASK)
        done, start, end = end, next_start, next_end
    parts += (text[done:start], MASK, text[end:])
    return "".join(parts)


def redact_error(text: str) -> str:
    """Return ``text`` with passwords, tokens, keys and similar secrets replaced by ``[REDACTED]``.

    Runs in time linear in ``len(text)``. What is recognised, and what cannot be, is listed in the
    README (Security).
    """
    low = _ascii_lower(text)
    spans = _pem_spans(text) + _url_spans(text) + _shape_spans(text) + scheme_spans(text)
    spans += key_value_spans(text, low) + flag_spans(text, low) + element_spans(text, low)
    spans += client_spans(text)
    return _masked(text, spans)
