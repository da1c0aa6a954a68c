"""The queue's rules for the values of a job, whichever face they come from (docs/api.md#input-rules): payloads and results within their limits, keys of printable text, start times in range.

Each rule raises ``JobValidationError`` with a code (``queuelog.queue.errors``) and the field to blame.
The JSON API declares the same rules in its shapes (``queuelog/api/jobs.py``), which call
``check_document`` for what no JSON Schema can say; the submit page calls these directly.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from decimal import Decimal
from typing import Any

from queuelog.inputs import text_fault
from queuelog.queue.errors import Code, JobValidationError

EARLIEST_YEAR, LATEST_YEAR = 2000, 9000
MAX_RETRIES_LIMIT = 25  # a job's max_retries is 0 to this, whichever face sets it
DEFAULT_MAX_RETRIES = 3
MAX_KEY_LENGTH = 255  # the characters of an idempotency key (the column's width)
MAX_CRON_LENGTH = 255  # the characters of a cron expression (the column's width)
_TEXT_CODES = {"nul": Code.NUL_CHARACTER, "surrogate": Code.LONE_SURROGATE}


class _Underflow(Exception):
    """Raised by ``_read_float`` from inside the JSON parser (not a ValueError: that is malformed JSON)."""


def _underflows(text: str) -> bool:
    """Whether a JSON number, written with a digit other than 0 before its exponent, reads as 0."""
    return float(text) == 0 and any(digit in "123456789" for digit in text.lower().partition("e")[0])


def _read_float(text: str) -> float:
    if _underflows(text):
        raise _Underflow
    return float(text)


_TINY = object()  # where a number that reads as 0 stood, when looking for it


def read_json(text: str | bytes, field: str = "", **options: Any) -> Any:
    """``json.loads`` (with ``options``), refusing a number written non-zero that a 64-bit float can only
    hold as 0 (``1e-400``, which would be stored as 0 without a word): ``NUMBER_UNDERFLOW``, naming where
    it stands below ``field`` (``payload.amounts[2]``). A number too large for one (``1e400``) reads as
    infinite, which ``check_document`` refuses (``NOT_FINITE``)."""
    try:
        return json.loads(text, parse_float=_read_float, **options)
    except _Underflow:
        value = json.loads(text, parse_float=lambda t: _TINY if _underflows(t) else float(t), **options)
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        node, path = stack.pop()
        if node is _TINY:
            raise JobValidationError(Code.NUMBER_UNDERFLOW, field=path)
        if isinstance(node, dict):
            stack.extend((item, f"{path}.{key}" if path else key) for key, item in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{index}]") for index, item in reversed(list(enumerate(node))))
    raise AssertionError("an underflowing number was read but not found")  # pragma: no cover


def check_document(value: Any, field: str, *, max_bytes: int, max_depth: int) -> str:
    """Check a JSON object (a payload or a result) against the limits; returns its compact UTF-8
    serialization. Walked without recursion: any depth is refused, never overflows the stack.

    A ``-0.0`` becomes ``0.0`` in ``value`` itself: PostgreSQL's jsonb keeps no negative zero, and
    SQLite's text would, so that both engines store and serve the same number."""
    if not isinstance(value, dict):
        raise JobValidationError(Code.NOT_AN_OBJECT, field=field)
    stack: list[tuple[Any, int]] = [(value, 1)]
    expansion = 0  # how much longer numbers get when stored (see _stored_number_growth)
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise JobValidationError(Code.TOO_DEEP, field=field, limit=max_depth)
            for key, item in node.items():
                check_storable(key, field)
                if _negative_zero(item):
                    node[key] = 0.0
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth > max_depth:
                raise JobValidationError(Code.TOO_DEEP, field=field, limit=max_depth)
            for index, item in enumerate(node):
                if _negative_zero(item):
                    node[index] = 0.0
                stack.append((item, depth + 1))
        elif isinstance(node, str):
            check_storable(node, field)
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise JobValidationError(Code.NOT_FINITE, field=field)
            expansion += _stored_number_growth(node)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode("utf-8")) + expansion
    if size > max_bytes:
        raise JobValidationError(Code.TOO_LARGE, field=field, size=size, limit=max_bytes)
    return text


def _negative_zero(value: Any) -> bool:
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


def _stored_number_growth(number: float) -> int:
    """How many more characters ``number`` takes as PostgreSQL's jsonb stores and prints it than as we
    serialize it: jsonb keeps numbers as exact decimals, so ``1e308`` comes back as 309 digits. Counting
    that keeps the payload limit true for what is stored and served, on either database."""
    text = repr(number)
    if "e" not in text:
        return 0
    return len(format(Decimal(text), "f")) - len(text)


def check_storable(text: str, field: str) -> None:
    """Text the databases can store: no NUL character, no lone surrogate."""
    fault = text_fault(text)
    if fault is not None:
        raise JobValidationError(_TEXT_CODES[fault], field=field)


def check_label(text: str, field: str, max_length: int) -> None:
    """A name or key: 1 to ``max_length`` printable characters, as ``str.isprintable`` has them."""
    if not (1 <= len(text) <= max_length and text.isprintable()):
        raise JobValidationError(Code.NOT_PRINTABLE, field=field, max_length=max_length)


def check_start_time(when: datetime, field: str) -> None:
    """A start time (``run_at``) in the years the API accepts."""
    if not EARLIEST_YEAR <= when.year <= LATEST_YEAR:
        raise JobValidationError(Code.TIME_OUT_OF_RANGE, field=field, low=EARLIEST_YEAR, high=LATEST_YEAR)
