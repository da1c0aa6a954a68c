"""Input rules of the JSON API (README, "Input rules"): content type, JSON, strict fields, sizes, depth and types."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from flask import current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from queuelog.api.problems import ApiError, invalid
from queuelog.inputs import text_problem
from queuelog.models import PRIORITIES, STATUSES
from queuelog.queue import JobSpec

MAX_DELAY_SECONDS = 366 * 24 * 3600
MAX_RETRIES_LIMIT = 25
MAX_BATCH_KEY = 250  # leaves room for "#499" within the 255 characters of a key
JOB_FIELDS = frozenset(
    {"type", "payload", "priority", "max_retries", "idempotency_key", "run_at", "delay_seconds"}
)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_body() -> dict[str, Any]:
    """The request's JSON object. An empty body is ``{}``; anything else must be application/json."""
    data = _request_bytes()
    if not data.strip():
        return {}
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported-media-type", "the request body must be application/json")
    if request.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
        raise ApiError(415, "unsupported-media-type", "compressed request bodies are not accepted")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except RecursionError:
        raise invalid("body", "nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "malformed-json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise invalid("body", "must be a JSON object")
    return value


def _request_bytes() -> bytes:
    """The whole body, at most MAX_CONTENT_LENGTH bytes. A body without a ``Content-Length`` (chunked) is
    read to one byte past the limit, so that an oversized one is refused (413) rather than cut and used
    (Werkzeug's capped stream raises 413 itself when it is asked for that byte)."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    if request.content_length is not None or limit is None:
        return request.get_data(cache=True)  # a declared length past the limit is 413 before reading
    chunks, size = [], 0
    while chunk := request.stream.read(min(65536, limit + 1 - size)):  # reads may come back short
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLarge()
    return b"".join(chunks)


def check_fields(body: dict[str, Any], allowed: Iterable[str], prefix: str = "") -> None:
    """Unknown fields are an error, all of them named at once."""
    allowed = frozenset(allowed)
    unknown = [key for key in body if key not in allowed]
    if unknown:
        errors = [{"field": prefix + key, "message": "unknown field"} for key in unknown]
        raise ApiError(
            422,
            "validation-failed",
            "unknown field(s): " + ", ".join(e["field"] for e in errors),
            errors=errors,
        )


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def json_document(value: Any, field: str, *, max_bytes: int, max_depth: int) -> str:
    """Check a JSON object against the payload limits; returns its compact UTF-8 serialization."""
    if not isinstance(value, dict):
        raise invalid(field, "must be a JSON object")
    # Walk without recursion: depth, and strings PostgreSQL's jsonb and UTF-8 can hold.
    stack: list[tuple[Any, int]] = [(value, 1)]
    expansion = 0  # how much longer numbers get when stored (see _stored_number_growth)
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise invalid(field, f"nested more than {max_depth} levels deep")
            for key, item in node.items():
                check_text(key, field)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            if depth > max_depth:
                raise invalid(field, f"nested more than {max_depth} levels deep")
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            check_text(node, field)
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise invalid(field, "numbers must be finite")
            expansion += _stored_number_growth(node)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode("utf-8")) + expansion
    if size > max_bytes:
        raise invalid(field, f"is {size} bytes serialized; the limit is {max_bytes}")
    return text


def document_within_limits(value: Any, field: str) -> str:
    """A payload or result, checked against the configured size and depth limits."""
    config = current_app.config["QUEUELOG"]
    return json_document(
        value, field, max_bytes=config["MAX_PAYLOAD_BYTES"], max_depth=config["MAX_PAYLOAD_DEPTH"]
    )


def batch_items(body: dict[str, Any], limit: int, what: str) -> list[Any]:
    """The ``jobs`` list of a batch request: 1 to ``limit`` items, and no other field."""
    check_fields(body, {"jobs"})
    items = body.get("jobs")
    if not isinstance(items, list) or not 1 <= len(items) <= limit:
        raise invalid("jobs", f"must be a list of 1 to {limit} {what}")
    return items


def _stored_number_growth(number: float) -> int:
    """How many more characters ``number`` takes as PostgreSQL's jsonb stores and prints it than as we
    serialize it: jsonb keeps numbers as exact decimals, so ``1e308`` comes back as 309 digits. Counting
    that keeps the payload limit true for what is stored and served, on either database."""
    text = repr(number)
    if "e" not in text:
        return 0
    return len(format(Decimal(text), "f")) - len(text)


def check_text(text: str, field: str) -> None:
    """The one rule for text from outside (see ``queuelog.inputs``), as a 422 naming the field."""
    problem = text_problem(text)
    if problem:
        raise invalid(field, "strings " + problem)


def printable(value: Any, field: str, *, max_length: int) -> str:
    """A string of 1 to ``max_length`` printable characters (names, keys, tokens)."""
    if not isinstance(value, str):
        raise invalid(field, "must be a string")
    if not 1 <= len(value) <= max_length:
        raise invalid(field, f"must be 1 to {max_length} characters")
    if not value.isprintable():
        raise invalid(field, "must contain only printable characters")
    return value


def parse_priority(value: Any, field: str = "priority") -> int:
    if not isinstance(value, str) or value.lower() not in PRIORITIES:
        raise invalid(field, "must be one of " + ", ".join(PRIORITIES))
    return PRIORITIES[value.lower()]


def parse_status(value: Any, field: str = "status") -> str:
    if value not in STATUSES:
        raise invalid(field, "must be one of " + ", ".join(STATUSES))
    return value


def int_in_range(value: Any, field: str, low: int, high: int) -> int:
    if not is_int(value) or not low <= value <= high:
        raise invalid(field, f"must be an integer from {low} to {high}")
    return value


def parse_job(body: Any, *, prefix: str = "", header_key: str | None = None) -> JobSpec:
    """Turn one job body (``POST /jobs`` or an item of a batch) into a ``JobSpec``."""
    if not isinstance(body, dict):
        raise invalid(prefix.rstrip(".") or "body", "must be a JSON object")
    check_fields(body, JOB_FIELDS, prefix)
    if "type" not in body:
        raise invalid(prefix + "type", "is required")
    job_type = printable(body["type"], prefix + "type", max_length=64)
    payload = body.get("payload", {})
    payload_json = document_within_limits(payload, prefix + "payload")
    priority = parse_priority(body.get("priority", "low"), prefix + "priority")
    max_retries = int_in_range(body.get("max_retries", 3), prefix + "max_retries", 0, MAX_RETRIES_LIMIT)

    key = body.get("idempotency_key")
    if key is not None:
        key = printable(key, prefix + "idempotency_key", max_length=255)
    if header_key is not None:
        header_key = printable(header_key, "Idempotency-Key", max_length=255)
        if key is not None and key != header_key:
            raise invalid(prefix + "idempotency_key", "differs from the Idempotency-Key header")
        key = header_key

    run_at = delay = None
    if "run_at" in body and "delay_seconds" in body:
        raise invalid(prefix + "run_at", "give run_at or delay_seconds, not both")
    if body.get("run_at") is not None:
        run_at = parse_time(body["run_at"], prefix + "run_at")
    if body.get("delay_seconds") is not None:
        delay = body["delay_seconds"]
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not 0 <= delay <= MAX_DELAY_SECONDS
        ):
            raise invalid(prefix + "delay_seconds", f"must be a number from 0 to {MAX_DELAY_SECONDS}")
    return JobSpec(
        type=job_type,
        payload=payload,
        payload_json=payload_json,
        priority=priority,
        max_retries=max_retries,
        idempotency_key=key,
        run_at=run_at,
        delay_seconds=delay,
    )


def parse_time(value: Any, field: str) -> datetime:
    """An RFC 3339 timestamp with a time zone."""
    if not isinstance(value, str) or len(value) > 64:
        raise invalid(field, "must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise invalid(field, "must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z") from None
    if parsed.tzinfo is None:
        raise invalid(field, "needs a time zone (Z or an offset)")
    if not 2000 <= parsed.year <= 9000:
        raise invalid(field, "is out of range")
    return parsed


def header_text(name: str) -> str | None:
    """A request header as text: HTTP carries bytes, which WSGI hands over as Latin-1; we read UTF-8."""
    value = request.headers.get(name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise invalid(name, "must be UTF-8 text") from None


def batch_key(header_key: str | None, index: int) -> str | None:
    """The idempotency key of job ``index`` of a batch sent with ``Idempotency-Key: K``: ``K#index``, so
    that replaying the whole batch finds every job it made (README, "Idempotency")."""
    if header_key is None:
        return None
    header_key = printable(header_key, "Idempotency-Key", max_length=MAX_BATCH_KEY)
    return f"{header_key}#{index}"


def lease_seconds(body: dict[str, Any]) -> int | None:
    """The optional ``lease_seconds`` of a claim or heartbeat: 5 s to 12 h."""
    value = body.get("lease_seconds")
    return None if value is None else int_in_range(value, "lease_seconds", 5, 43200)


def lease_token(body: dict[str, Any], prefix: str = "") -> str:
    token = body.get("lease_token")
    if token is None:
        raise invalid(prefix + "lease_token", "is required")
    return printable(token, prefix + "lease_token", max_length=64)
