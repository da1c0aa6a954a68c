"""Passwords given to command-line clients: ``mysql -pPW``, ``sshpass -p PW``, ``curl -u user:pw``.

Part of error redaction (docs/operations.md#redaction-of-error-text); :mod:`queuelog.redact` merges the spans found here.
A command is recognised in a shell line and in a list repr (``['mysql', '-u', 'root', '-pPW']``, as
``subprocess`` errors print it). Every function returns ``(start, end)`` spans of ``text`` to mask and
runs in time linear in the text: a pattern starts at the client's name, then crosses at most 16 other
arguments of bounded length, each taken whole by a possessive quantifier, on the same line, and stops
at the next occurrence of the name; the search for a name resumes after the last value found.
"""

from __future__ import annotations

import re

from queuelog.redact.keys import Lines, Span, close_quote

# Between two arguments: spaces, or a comma and spaces in a list repr.
_SEP = r"(?:,[ \t]{0,8}+|[ \t]{1,8}+)"
# After the option's own argument ends (its closing quote in a list repr), the next argument opens.
_NEXT = re.compile(rf"""["']?+{_SEP}(?P<open>["']?+)""")
_PLAIN_ARG = re.compile(r"""[^\s'"]*+""")


def _client(names: str, option: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A client's name, up to 16 arguments that are neither ``option`` nor the name again, then ``option``
    itself; and the same without the name, to look for the option again after its value.

    The name starts with one letter and a lookbehind, so that only that letter's positions are tried; an
    argument loop stops at the next occurrence of the name, so none is crossed by two loops.
    """
    args = rf"""["']?+(?:{_SEP}["']?+(?!{option}|{names})[^\s'",;|&]{{1,1024}}+["']?+){{0,16}}+
        {_SEP}(?P<open>["']?+)(?P<option>{option})"""
    start = rf"{names[0]}(?<![\w.-]{names[0]})(?:{names[1:]})(?:\.exe)?+"
    return re.compile(start + args, re.X), re.compile(args, re.X)


# mysql, mysqldump, mysqladmin, mariadb...: "-pPW" only (after "-p" and a space comes the database).
_MYSQL = _client(r"m(?:ysql(?:dump|admin)?|ariadb(?:-dump|-admin)?)", r"-p")
# sshpass: "-p PW" or "-pPW".
_SSHPASS = _client(r"sshpass", r"-p")
# curl: "-u user:pw", "-uuser:pw", "--user user:pw", "--user=user:pw"; "-U" and "--proxy-user" alike.
_CURL = _client(r"curl", r"-[uU]|--(?:proxy-)?user(?![\w-])")


def _argument(text: str, pos: int, quote: str, lines: Lines) -> Span:
    """The argument starting at ``pos``; ``quote`` opened the list item that holds it, if any."""
    if not quote and text[pos : pos + 1] in ("'", '"'):  # a quoted shell argument
        quote, pos = text[pos], pos + 1
    if quote:
        return pos, close_quote(text, quote, pos, lines.end(pos))
    return pos, _PLAIN_ARG.match(text, pos).end()


def _option_values(text: str, client: tuple[re.Pattern[str], ...], apart: bool) -> list[Span]:
    """Values of the client's option: attached (``-pPW``, ``--user=a:b``), or, if ``apart``, the next
    argument (``-p PW``)."""
    spans: list[Span] = []
    lines = Lines(text)
    command, more = client
    done = 0  # end of the last value: a name before it was read as an argument of the command before
    while found := command.search(text, done):
        while found:
            pos = found.end()
            after = _NEXT.match(text, pos)
            if after:
                start, end = _argument(text, after.end(), after.group("open"), lines) if apart else (pos, pos)
            else:
                if found.group("option").startswith("--") and text.startswith("=", pos):
                    pos += 1
                start, end = _argument(text, pos, found.group("open"), lines)
            if end > start:
                spans.append((start, end))
            done = end
            found = more.match(text, end)  # the option again, further on the same command line
    return spans


def client_spans(text: str) -> list[Span]:
    """Passwords given to mysql and mariadb (``-pPW``), sshpass (``-p PW``) and curl (``-u user:pw``,
    the password only)."""
    spans = _option_values(text, _MYSQL, apart=False) + _option_values(text, _SSHPASS, apart=True)
    for start, end in _option_values(text, _CURL, apart=True):
        colon = text.find(":", start, end)  # without one, curl asks for the password
        if colon >= 0:
            spans.append((colon + 1, end))
    return spans
