"""Redaction of secrets in worker error text (docs/operations.md#redaction-of-error-text), applied before anything is stored.

Each detector below returns ``(start, end)`` spans of the text; the spans are merged and each merged
span becomes ``[REDACTED]``. Every detector runs in time linear in the text, on any input: private key
blocks are found armour to armour and URL passwords by hand with ``str.find``, each scan moving forward,
and the regular expressions start at a literal, bound the length of whatever precedes a fixed part, and
use possessive quantifiers (or a lookbehind that lets a run be scanned from its start only) where a run
is followed by something else.
"""

from __future__ import annotations

import re

from queuelog.redact.commands import client_spans
from queuelog.redact.keys import MASK, Span, element_spans, flag_spans, key_value_spans, scheme_spans

__all__ = ["MASK", "redact_error"]

# A JWT, on one line or wrapped over lines (a break, then up to 8 spaces or tabs). Each of its three
# parts crosses at most 8 breaks, so that an attempt that fails has scanned at most 9 lines per part:
# text made of many lines that each start like a JWT costs a bounded amount per line. Its last part takes
# the next line's run only when that run ends its line or does not read as a word (a wrapped signature,
# not the "Traceback" on the line after a JWT).
_T = "[A-Za-z0-9_-]"
_BREAK = r"\r?\n[ \t]{0,8}+"
_AT_LEAST_8 = rf"(?=(?:{_T}|{_BREAK}){{8}})"
_PART = rf"{_T}*+(?:{_BREAK}{_T}++){{0,8}}+"
_SIGNATURE_GOES_ON = rf"""{_T}{{1,512}}+(?:[\r\n"'`,;)\]}}]|\Z)|[0-9_-]|[A-Za-z][a-z]{{0,512}}+[A-Z0-9_-]"""
_SIGNATURE = rf"{_T}*+(?:{_BREAK}(?={_SIGNATURE_GOES_ON}){_T}++){{0,8}}+"
_JWT = (
    rf"eyJ(?<!{_T}eyJ){_AT_LEAST_8}{_PART}(?:{_BREAK})?+\.(?:{_BREAK})?+"
    rf"eyJ{_AT_LEAST_8}{_PART}(?:{_BREAK})?+\.{_SIGNATURE}"
)

# Token shapes that are secrets wherever they appear. The lookbehinds after a prefix keep a match from
# starting inside a longer word (and, for JWTs, from rescanning a run from each of its positions).
_SHAPES = re.compile(
    _JWT
    + r"""
    |ql_(?<![A-Za-z0-9_]ql_)[A-Za-z0-9_-]{16,}+                    # queuelog API key
    |(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)         # AWS access key id
     (?<![A-Za-z0-9]....)[A-Z0-9]{16}(?![A-Za-z0-9])
    |gh[pousr]_(?<![A-Za-z0-9]gh._)[A-Za-z0-9]{20,}+               # GitHub
    |github_pat_[A-Za-z0-9_]{20,}+
    |gl(?:pat|rt|ptt|dt|ft|cbt|imt|soat)-[A-Za-z0-9_-]{20,}+       # GitLab (personal, runner...)
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
    |key-(?<![A-Za-z0-9_-]key-)[A-Za-z0-9]{32}(?![A-Za-z0-9])      # Mailgun
    |do[opr]_v1_(?<![A-Za-z0-9_]do._v1_)[a-f0-9]{64}(?![A-Za-z0-9])  # DigitalOcean
    |shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![A-Za-z0-9])             # Shopify
    |SK(?<![A-Za-z0-9]SK)[0-9a-fA-F]{32}(?![A-Za-z0-9])            # Twilio API key
    |EAAA(?<![A-Za-z0-9_-]EAAA)[A-Za-z0-9_-]{60,}+                 # Square access token
    |sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}+                            # Square OAuth
    |:(?:(?<=[0-9]:)(?P<telegram>AA[A-Za-z0-9_-]{32,33}+)(?![A-Za-z0-9_-])  # Telegram bot: the id stays
     # user:password@host:port or @host/ without a scheme (with one, _url_spans finds it): the password
     |(?<=[A-Za-z0-9_.+-]:)(?P<userinfo>[^\s@/:"'<>`]{1,256}+)@
      (?!sha(?:256|384|512):)(?=[A-Za-z0-9][A-Za-z0-9.-]{0,252}+(?::[0-9]|/|\()))  # not image:tag@sha256:
    """,
    re.X,
)

# "-----BEGIN RSA PRIVATE KEY-----", "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----", on lowercased text.
_ARMOUR = re.compile(r"----(?<!-----)-?+ ?begin (?P<label>[a-z0-9 ]{1,64}?) ?-----?+")


def _armour_end(label: str) -> re.Pattern[str]:
    return re.compile(rf"----(?<!-----)-?+ ?end {re.escape(label)} ?-----?+")


_URL_END = re.compile(r"""[\s"'<>`]""")
# The user name before the password in a URL: no "/", "?", "#" or space, at most 256 characters.
_USER = re.compile(r"[^:/?#\s]{0,256}+:")
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _pem_spans(text: str, low: str) -> list[Span]:
    """Private key blocks (PEM, OpenSSH, PGP, SSH2): BEGIN to the matching END, or to the end if
    unterminated; the armour in any case, with four or five dashes, and spaces inside them."""
    spans: list[Span] = []
    pos = 0
    while (found := _ARMOUR.search(low, pos)) is not None:
        pos = found.end()
        label = found.group("label")
        if "private key" not in label and "secret key" not in label:
            continue
        end = _armour_end(label).search(low, pos)
        if end is None:
            spans.append((found.start(), len(text)))
            break
        spans.append((found.start(), end.end()))
        pos = end.end()
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
    docs/operations.md#redaction-of-error-text.
    """
    low = _ascii_lower(text)
    spans = _pem_spans(text, low) + _url_spans(text) + _shape_spans(text) + scheme_spans(text)
    spans += key_value_spans(text, low) + flag_spans(text, low) + element_spans(text, low)
    spans += client_spans(text)
    return _masked(text, spans)
