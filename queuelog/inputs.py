"""Rules for text and numbers from outside, shared by the JSON API, the pages and the command line."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

TextFault = Literal["nul", "surrogate"]
_PROBLEMS = {
    "nul": "may not contain the NUL character (\\u0000)",
    "surrogate": "must be valid Unicode (no lone surrogates)",
}


def text_fault(text: str) -> TextFault | None:
    """Why ``text`` cannot be stored, or None. PostgreSQL refuses NUL characters, and UTF-8 cannot encode
    lone surrogates (which JSON's ``\\udfff`` escapes can produce): both would fail deep in the driver."""
    if "\x00" in text:
        return "nul"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "surrogate"
    return None


def text_problem(text: str) -> str | None:
    """``text_fault`` in English words, or None."""
    fault = text_fault(text)
    return None if fault is None else _PROBLEMS[fault]


def first_text_problem(values: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first ``(name, problem)`` among ``(name, text)`` pairs, or None when all of them are fine."""
    for name, text in values:
        problem = text_problem(name) or text_problem(text)
        if problem:
            return name, problem
    return None


def ascii_int(text: str | None, *, max_digits: int = 18) -> int | None:
    """``text`` as a non-negative integer if it is 1 to ``max_digits`` ASCII digits, else None.

    ``str.isdigit`` alone accepts "²" and other Unicode digits that ``int`` then refuses."""
    if text and len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


# A job type's name (the allowlist's, and QUEUELOG_JOB_TYPES's): 1 to 64 letters, digits and "_.:-",
# starting with a letter or a digit.
TYPE_NAME_MAX_LENGTH = 64
TYPE_NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{TYPE_NAME_MAX_LENGTH - 1}}}$"
