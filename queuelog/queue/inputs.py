"""The queue's rules for the values of a job, whichever face they come from (README, "JSON API": input
rules): payloads and results within their limits, keys of printable text, start times in range.

Each rule raises ``JobValidationError`` with a code (``queuelog.queue.errors``) and the field to blame.
The JSON API declares the same rules in its shapes (``queuelog/api/schemas.py``), which call
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
_TEXT_CODES = {"nul": Code.NUL_CHARACTER, "surrogate": Code.LONE_SURROGATE}


def check_document(value: Any, field: str, *, max_bytes: int, max_depth: int) -> str:
    """Check a JSON object (a payload or a result) against the limits; returns its compact UTF-8
    serialization. Walked without recursion: any depth is refused, never overflows the stack."""
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
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth > max_depth:
                raise JobValidationError(Code.TOO_DEEP, field=field, limit=max_depth)
            stack.extend((item, depth + 1) for item in node)
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
