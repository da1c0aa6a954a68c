"""The kinds of value the API's shapes are made of (``jobs.py``, ``workers.py``, ...): each a JSON Schema, the 422 message for
a value that breaks it, and the check, next to it, for what a schema cannot say (docs/api.md#input-rules). Every such check is told in the schema's ``description``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from flask import current_app

from queuelog.api.problems import ApiError, invalid
from queuelog.api.shapes import COMPONENTS, REF, Configured, Field, printable_pattern
from queuelog.models import PRIORITIES
from queuelog.queue.console import PATH_KEYS, PATH_PATTERN, SEARCH_NAME_CHARS
from queuelog.queue.inputs import check_document

COMPONENTS["PrintableText"] = {
    "type": "string",
    "pattern": printable_pattern(),
    "description": "Printable characters only, as Python's str.isprintable has them: no control or format "
    "characters, no separators but the space, nothing unassigned or private-use. The pattern is written "
    "from the server's Unicode tables.",
}
RFC3339 = (
    "^(?:[2-8][0-9]{3}|9000)-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    "T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
TIMESTAMP_MESSAGE = "must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z"


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    if nullable:
        schema["type"] = [schema["type"], "null"]
    return schema


def text(max_length: int, description: str, *, nullable: bool = False, **kw: Any) -> Field:
    """1 to ``max_length`` printable characters (names, keys, tokens)."""
    schema: dict[str, Any] = {"$ref": REF + "PrintableText", "minLength": 1, "maxLength": max_length}
    schema = {"anyOf": [schema, {"type": "null"}]} if nullable else schema
    schema["description"] = description

    def message(value: Any) -> str:
        if not isinstance(value, str):
            return "must be a string"
        if not 1 <= len(value) <= max_length:
            return f"must be 1 to {max_length} characters"
        return "must contain only printable characters"

    return Field(schema, message, **kw)


def integer(low: int, high: int, description: str, *, nullable: bool = False, **kw: Any) -> Field:
    """An integer in ``low..high``, written as one: JSON Schema counts 3.0 as an integer; the API does not."""
    message = f"must be an integer from {low} to {high}"
    schema = _nullable({"type": "integer", "minimum": low, "maximum": high}, nullable)
    schema["description"] = description + " Written without a fraction or exponent (3, not 3.0)."

    def check(value: Any, path: str) -> int:
        if type(value) is not int:
            raise invalid(path, message)
        return value

    return Field(schema, message, check=check, **kw)


def number(low: float, high: float, description: str, *, nullable: bool = False, **kw: Any) -> Field:
    schema = _nullable({"type": "number", "minimum": low, "maximum": high}, nullable)
    schema["description"] = description
    return Field(schema, f"must be a number from {low} to {high}", **kw)


def boolean(description: str, **kw: Any) -> Field:
    return Field({"type": "boolean", "description": description}, "must be true or false", **kw)


def choice(values: tuple[str, ...], description: str, **kw: Any) -> Field:
    schema = {"type": "string", "enum": list(values), "description": description}
    return Field(schema, "must be one of " + ", ".join(values), **kw)


def priority(description: str, **kw: Any) -> Field:
    """A priority name in any case ("HIGH" is high); the value is the number stored."""
    either = "|".join("".join(f"[{c.lower()}{c.upper()}]" for c in name) for name in PRIORITIES)
    schema = {"type": "string", "pattern": f"^(?:{either})$", "examples": list(PRIORITIES)}
    schema["description"] = description + " One of " + ", ".join(PRIORITIES) + ", in any case."
    return Field(
        schema, "must be one of " + ", ".join(PRIORITIES), check=lambda v, _: PRIORITIES[v.lower()], **kw
    )


class Json(NamedTuple):
    """A payload or result that passed the limits, and its compact serialization."""

    value: dict[str, Any]
    text: str


def document(description: str, *, nullable: bool = False, **kw: Any) -> Field:
    """A JSON object within the configured size and depth, holding only text that can be stored."""
    schema = _nullable({"type": "object"}, nullable)
    schema["description"] = Configured(
        text=description + " At most {MAX_PAYLOAD_BYTES:,} bytes serialized as compact UTF-8 JSON, "
        "counting each number as the database stores it (1e308 is 309 digits), and at most "
        "{MAX_PAYLOAD_DEPTH} levels deep; strings and keys may not hold \\u0000 or lone surrogates."
    )

    def check(value: dict[str, Any], path: str) -> Json:
        config = current_app.config["QUEUELOG"]
        limits = {"max_bytes": config["MAX_PAYLOAD_BYTES"], "max_depth": config["MAX_PAYLOAD_DEPTH"]}
        return Json(value, check_document(value, path, **limits))

    return Field(schema, "must be a JSON object", check=check, **kw)


def timestamp(description: str, **kw: Any) -> Field:
    """An RFC 3339 time with a time zone, in the years 2000 to 9000, on a real calendar date."""
    schema = {"type": ["string", "null"], "format": "date-time", "pattern": RFC3339, "maxLength": 64}
    schema["description"] = description + " RFC 3339 with Z or an offset, years 2000 to 9000."

    def message(value: Any) -> str:
        try:
            parse_time(value, "")
        except ApiError as exc:
            return exc.errors[0]["message"]
        return TIMESTAMP_MESSAGE

    return Field(schema, message, check=parse_time, **kw)


def parse_time(value: Any, field: str) -> datetime:
    """An RFC 3339 timestamp with a time zone."""
    if not isinstance(value, str) or len(value) > 64:
        raise invalid(field, TIMESTAMP_MESSAGE)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise invalid(field, TIMESTAMP_MESSAGE) from None
    if parsed.tzinfo is None:
        raise invalid(field, "needs a time zone (Z or an offset)")
    if not 2000 <= parsed.year <= 9000:
        raise invalid(field, "is out of range")
    return parsed


def answer(
    schema: dict[str, Any], description: str | None = None, out: Any = None, text: Any = None
) -> Field:
    """A value of an answer (never validated on the way out): its schema and how a record's value is shown,
    as a value (``out``) and as JSON text (``text``; by default the JSON of that value)."""
    if description:
        schema["description"] = description
    field = Field(schema, out=out)
    field.text = text
    return field


def array(item: Field, description: str | None = None) -> Field:
    return answer({"type": "array", "items": item.json_schema()}, description)


def payload_path(description: str) -> Field:
    """The keys of a payload field, separated by dots, as a search takes them (``PATH_PATTERN``, the
    queue layer's rule): printable text, parsed into a tuple of keys."""
    schema = {"$ref": REF + "PrintableText", "pattern": PATH_PATTERN, "description": description}
    message = (
        f"must be 1 to {PATH_KEYS} keys of 1 to {SEARCH_NAME_CHARS} characters separated by dots, without"
        " quotes or backslashes"
    )
    return Field(schema, message, check=lambda value, path: tuple(value.split(".")))
