"""Secrets recognised by a key name: ``password=…``, ``"api_key": "…"``, ``Authorization: Bearer …``.

Part of error redaction (docs/operations.md#redaction-of-error-text); :mod:`queuelog.redact` merges the spans found here.
Every function returns ``(start, end)`` spans of ``text`` to mask and runs in time linear in the text:
the patterns start at a literal word, bound every piece that precedes a fixed part, use possessive
quantifiers where a run is followed by something else, and the scan always moves forward.

The name search runs on ``low``, an ASCII-lowercased copy of the text of the same length, so that its
alternatives keep a first-character prefilter (an ``(?i)`` alternation would try every position).
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"
Span = tuple[int, int]

# Words that make a key name secret. Some English words that merely start with them are left out
# (author, authority, passed, passing, passage, passenger, passive, secretary, tokenizer, keyboard,
# keyword, keystroke, keyspace), and "Unauthorized"; "pw" and "sig" count only as whole words.
_FAMILY_WORDS = r"""
    pass(?!e[ds]|ing|age|enger|ive)(?:[ ]phrase)?
    |pwd|pw(?<![a-z0-9]pw)(?![a-z])
    |secret(?!ar)
    |token(?!iz)
    |auth(?<!unauth)(?!or(?!i[sz]))
    |key(?!board|word|stroke|space)
    |cookie|credential|signature|sig(?<![a-z0-9]sig)(?![a-z])
    |sess(?:ion)?[ ]?id|session
    |senha|contrase[ñÑn]a|kennwort|пароль|密码|密碼|口令|パスワード|비밀번호
"""
_FAMILY = re.compile(_FAMILY_WORDS, re.X)

# Spaces around separators: tab, space and the other Unicode space separators (no-break space, the
# en/em/thin spaces, ideographic space...).
_SP = r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]"

# HTTP authentication schemes; a value starting with one of them and a space is "scheme credentials".
_SCHEMES = r"bearer|basic|digest|token|api-?key|negotiate|ntlm|oauth|hoba|mutual|aws4-hmac-sha256|key"

# Quotes as they appear in text that was escaped once or more: backslash-escaped (\" or, JSON in a JSON
# string, \\\"), as a \u or \x escape, as an HTML entity, or %-encoded.
_QUOTES = r"""\\{0,7}+["']|\\u00(?:22|27)|\\x2[27]|&quot;|&apos;|&\#0{0,3}3[49];|&\#x0{0,3}2[27];|%2[27]"""

# A key: a family word, the rest of its name (at most 64 characters), an optional closing quote (any of
# _QUOTES) or "]", then a separator ("==" and "::" are not); around a %-encoded separator, spaces may be
# %-encoded too (%20, %09, or "+" in a form). The groups "plain", "dquoted" and "squoted" are a quick path
# for the common values (unquoted, or quoted with no backslash) after a plain separator; anything else
# (an escaped quote, a value on the next line, a YAML block) goes through _value().
_ENC_SP = rf"(?:{_SP}|%20|%09|\+)"
_KEY = re.compile(
    rf"""
    (?P<name>(?:{_FAMILY_WORDS})[a-z0-9_.-]{{0,64}}+)
    (?:{_QUOTES})?\]?
    (?:{_ENC_SP}{{0,32}}+(?P<encoded>%3[ad]){_ENC_SP}{{0,32}}+
      |{_SP}{{0,32}}+(?:=>|=(?!=)|:(?!:)|：){_SP}{{0,32}}+(?P<value>)
       (?:(?!(?:{_SCHEMES}){_SP})(?P<plain>[^\s&,;)\]}}>"'<\[({{\\|][^\s&,;)\]}}>"'<]*+)(?!["'])
         |"(?P<dquoted>[^"\\\n]*+)"|'(?P<squoted>[^'\\\n]*+)')?)
    """,
    re.X,
)

_QUICK = ("plain", "dquoted", "squoted")

# Exception class names end with one of these (case-sensitive): "KeyError: 'user'" is a message.
_EXCEPTION_SUFFIXES = (
    "Error",
    "Exception",
    "Warning",
    "Failure",
    "Failed",
    "Expired",
    "Invalid",
    "Denied",
    "Missing",
    "Required",
    "Mismatch",
    "NotFound",
    "Exceeded",
)

# The start of exception names about a wrong password ("InvalidPasswordError", "WrongPasswordException").
_WRONG = ("Invalid", "Wrong", "Bad", "Incorrect")

# A command-line flag with its value after a space, or in a list repr: --password x, '--password', 'x'.
_FLAG = re.compile(
    rf"""--(?<![^\s"'\[(,]--)(?!-)(?P<name>[a-z0-9_.-]{{1,64}}+)
    (?:{_SP}++|(?P<q>["']){_SP}*+,{_SP}*+(?=["']))""",
    re.X,
)

_QUOTE = re.compile(rf"""[bBrRuU]{{0,2}}({_QUOTES})""")
# After a separator at the end of a line, the value is on the next one, perhaps indented; after a YAML
# block indicator ("|", ">-"...), it is every following line indented more than the key's.
_NEXT_LINE = re.compile(r"\r?\n[ \t]{0,64}+")
_BLOCK = re.compile(r"[|>][1-9]?[-+]?[1-9]?[ \t]{0,32}+(?:#[^\n]{0,256}+)?\r?\n")
_INDENT = re.compile(r"[ \t]*+")
# Unquoted values end at whitespace, & , ; a closing bracket or a quote; after a %-encoded separator
# also at the %-encoded forms of those (%20 %22 %26 %27 %29 %2C %3B %3E %5D %7D).
_PLAIN_VALUE = re.compile(r"""[^\s&,;)\]}>"'<]*+""")
_ENCODED_VALUE = re.compile(r"""(?:[^\s&,;)\]}>"'<%]|%(?!2[02679Cc]|3[BbEe]|5[Dd]|7[Dd]))*+""")
_COOKIE_VALUE = re.compile(r"""[^\s;,"'<>)\]}]++(?:;[ \t]*+[^\s;,"'<>)\]}]++)*+""")

# HTTP authentication: a scheme word, then either auth-params (Digest username="a", response="b") or
# one credential token. The scheme word stays readable; the credentials are masked.
_CREDENTIALS = r"""
    (?P<cred>[\w-]{1,64}+=(?:"[^"\n]*+"|[^\s,"]*+)(?:,[ \t]*+[\w-]{1,64}+=(?:"[^"\n]*+"|[^\s,"]*+))*+
    |[^\s"'<>,;]++)
"""
_SCHEME = re.compile(rf"(?i:{_SCHEMES}){_SP}++" + _CREDENTIALS, re.X)
# Outside a header, only these spellings count, not inside a longer word, and a single token must be
# 8 characters or more and not a plain word ("Token authentication failed" stays).
_BARE_SCHEME = re.compile(
    rf"""(?:Bearer|bearer|BEARER|Digest|ApiKey|Basic|Token)
    {_SP}++(?=[^\s"'<>,;=]*+=|[^\s"'<>,;]{{8}})(?![A-Za-z][a-z]*+(?![^\s"'<>,;]))"""
    + _CREDENTIALS,
    re.X,
)
# An XML element and its text, up to the next tag, which must close it (checked by element_spans); or
# its CDATA section, up to "]]>" (a "<" inside ends the search: each run is scanned from one start).
_ELEMENT = re.compile(
    r"""<(?P<tag>[a-z0-9_.:-]{1,64}+)(?:\s[^<>]{0,512}+)?+>
    (?:(?P<text>[^<]++)|<!\[cdata\[(?P<cdata>(?:[^<\]]|\](?!\]>))*+)\]\]>)</""",
    re.X,
)
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class Lines:
    """End of the line holding a position, remembered so that forward scans stay linear."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.start = self.stop = -1

    def end(self, pos: int) -> int:
        if not self.start <= pos <= self.stop:
            stop = self.text.find("\n", pos)
            self.start, self.stop = pos, len(self.text) if stop < 0 else stop
        return self.stop


def close_quote(text: str, quote: str, start: int, stop: int) -> int:
    """Index of the quote closing a value opened by ``quote``, or ``stop`` if the line has none."""
    end = text.find(quote, start, stop)
    if quote in "\"'":  # a plain quote preceded by a backslash is escaped, not closing
        while end > 0 and text[end - 1] == "\\":
            end = text.find(quote, end + 1, stop)
    return stop if end < 0 else end


def _block(text: str, pos: int) -> int:
    """The end of a YAML block that starts on the line after ``pos``: the following lines indented more
    than the line holding ``pos`` (blank lines included), each looked at once."""
    line = text.rfind("\n", 0, pos) + 1
    indent = _INDENT.match(text, line).end() - line
    end = start = text.find("\n", pos) + 1
    while start < len(text):
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        content = _INDENT.match(text, start, stop).end()
        if content < stop and text[content] != "\r":
            if content - start <= indent:
                break
            end = stop
        start = stop + 1
    return end


def _value(text: str, pos: int, name: str, encoded: bool, lines: Lines, *, first_line: bool = True) -> Span:
    """The span of the value starting at ``pos`` for the key ``name`` (lowercase); a separator that ends
    its line (``first_line``) takes its value from the next line."""
    if text.startswith(MASK, pos):
        return pos, pos
    if first_line:
        if block := _BLOCK.match(text, pos):
            end = _block(text, pos)
            start = _INDENT.match(text, block.end(), max(end, block.end())).end()
            return start, max(start, end)
        if next_line := _NEXT_LINE.match(text, pos):
            return _value(text, next_line.end(), name, encoded, lines, first_line=False)
    quoted = _QUOTE.match(text, pos)
    if quoted:
        start = quoted.end()
        return start, close_quote(text, quoted.group(1), start, lines.end(start))
    first = text[pos : pos + 1]
    if first == "{":  # an object: its own keys are looked at one by one
        return pos, pos
    if first in ("[", "("):  # a list of secrets: mask up to the first closing bracket on the line
        if text.startswith(MASK, pos + 1):
            return pos, pos
        stop = lines.end(pos)
        end = text.find("]" if first == "[" else ")", pos, stop)
        return pos + 1, stop if end < 0 else end
    scheme = _SCHEME.match(text, pos)
    if scheme:
        return scheme.span("cred")
    if "cookie" in name:
        cookie = _COOKIE_VALUE.match(text, pos)
        return (pos, cookie.end()) if cookie else (pos, pos)
    return pos, (_ENCODED_VALUE if encoded else _PLAIN_VALUE).match(text, pos).end()


def key_value_spans(text: str, low: str) -> list[Span]:
    """Values of keys named like secrets, in ``k=v``, ``k: v``, ``k => v``, JSON, reprs and URLs."""
    spans: list[Span] = []
    lines = Lines(text)
    done = 0  # end of the last value masked by _value(): keys inside it are part of it
    for key in _KEY.finditer(low):
        name_start, name_end = key.span("name")
        if name_start < done:
            continue
        if text.endswith(_EXCEPTION_SUFFIXES, name_start, name_end):
            # "InvalidPasswordError: hunter2": the message of such an error is often the password itself.
            word = low.rfind("pass", name_start, name_end)
            if word >= 0 and text.endswith(_WRONG, max(0, word - 9), word):
                value = key.start("value") if key.start("value") >= 0 else key.end()
                spans.append((value, lines.end(value)))
                done = lines.end(value)
            continue
        quick = key.lastgroup
        if quick in _QUICK and low.find("cookie", name_start, name_end) < 0:
            spans.append(key.span(quick))
            continue
        value = key.start("value") if key.start("value") >= 0 else key.end()
        start, end = _value(text, value, low[name_start:name_end], key.start("encoded") >= 0, lines)
        if end > start:
            spans.append((start, end))
            done = end
    return spans


def flag_spans(text: str, low: str) -> list[Span]:
    """Values of command-line flags named like secrets: ``--password x``, ``--password "x y"``, and in a
    list repr ``['--password', 'x']``."""
    spans: list[Span] = []
    lines = Lines(text)
    pos = 0
    while flag := _FLAG.search(low, pos):
        pos = flag.end()
        if not _FAMILY.search(flag.group("name")) or text.startswith(("-", MASK), pos):
            continue
        quoted = _QUOTE.match(text, pos)  # always, in a list repr; maybe, after a space
        if quoted:
            start = quoted.end()
            end = close_quote(text, quoted.group(1), start, lines.end(start))
        else:
            start, end = pos, _PLAIN_VALUE.match(text, pos).end()
        if end > start:
            spans.append((start, end))
            pos = end
    return spans


def scheme_spans(text: str) -> list[Span]:
    """Credentials after ``Bearer``, ``Basic``, ``Digest``, ``Token`` or ``ApiKey`` outside a header."""
    return [
        found.span("cred")
        for found in _BARE_SCHEME.finditer(text)
        if not found.start() or text[found.start() - 1] not in _WORD_CHARS
    ]


def element_spans(text: str, low: str) -> list[Span]:
    """Text of XML elements named like secrets: ``<password>x</password>``, ``<wsse:Password>``, and
    ``<password><![CDATA[x]]></password>``.

    ``<Key>`` alone is left: S3 errors name the object's key with it.
    """
    spans: list[Span] = []
    for found in _ELEMENT.finditer(low):
        tag = found.group("tag")
        local = tag.rpartition(":")[2]
        cdata = found.start("cdata") >= 0
        start, end = found.span("cdata" if cdata else "text")
        if (
            local == "key"
            or low[start - (11 if cdata else 2)] == "/"  # <password/> is empty: what follows is not its text
            or not low.startswith(tag + ">", found.end())
            or not _FAMILY.search(local)
            or text.endswith(_EXCEPTION_SUFFIXES, found.end("tag") - len(local), found.end("tag"))
            or text[start:end].isspace()
        ):
            continue
        spans.append((start, end))
    return spans
