"""Reading requests (docs/api.md#input-rules): the body, headers and query, which the operations'
declared shapes then judge (registry.py)."""

from __future__ import annotations

import sys
from typing import Any

from flask import current_app, g, request
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge

from queuelog.api.problems import ApiError, invalid
from queuelog.inputs import ascii_int
from queuelog.queue.inputs import read_json


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _IntegerTooLong(ValueError):
    """An integer of more digits than Python converts (``sys.get_int_max_str_digits``): valid JSON, but not
    a value the API keeps."""


def _read_int(text: str) -> int:
    if len(text) - text.startswith("-") > _MAX_DIGITS:
        raise _IntegerTooLong
    return int(text)


_MAX_DIGITS = sys.get_int_max_str_digits() or 4300


def read_body() -> dict[str, Any]:
    """The request's JSON object. An empty body is ``{}``; anything else must be application/json."""
    data = request_bytes()
    if not data.strip():
        return {}
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported-media-type", "the request body must be application/json")
    if request.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
        raise ApiError(415, "unsupported-media-type", "compressed request bodies are not accepted")
    try:
        value = read_json(data.decode("utf-8"), parse_constant=_reject_constant, parse_int=_read_int)
    except RecursionError:
        raise invalid("body", "nested too deeply") from None
    except _IntegerTooLong:
        raise invalid("body", f"holds an integer of more than {_MAX_DIGITS:,} digits") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "malformed-json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise invalid("body", "must be a JSON object")
    return value


def request_bytes() -> bytes:
    """The whole body as it came, read once: a second reader (an idempotency key's fingerprint) gets the
    same bytes, a chunked body's too, which its stream hands out only once."""
    if "request_body" not in g:
        g.request_body = _request_bytes()
    body: bytes = g.request_body
    return body


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


def query_values(args: MultiDict[str, str]) -> dict[str, Any]:
    """A query string as the JSON object its shape declares: ``limit`` is a number when it is 1 to 3 ASCII
    digits, ``batch_id`` when it is 1 to 18 (else they stay text, which the shape refuses); a repeated name
    counts once, as first given."""
    values: dict[str, Any] = dict(args.items())
    for name, digits in (("limit", 3), ("batch_id", 18)):
        number = ascii_int(values.get(name), max_digits=digits)
        if number is not None:
            values[name] = number
    return values


def header_text(name: str) -> str | None:
    """A request header as text: HTTP carries bytes, which WSGI hands over as Latin-1; we read UTF-8."""
    value = request.headers.get(name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise invalid(name, "must be UTF-8 text") from None
