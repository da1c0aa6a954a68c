"""Answers written as JSON text, straight from the records (docs/api.md#input-rules).

A job's answer is assembled field by field in the order its ``Shape`` declares (answers.py), each value
written by its field's ``text`` function. Payloads and results are the JSON text the database keeps
(``JobRecord``): they are spliced in as they are, never parsed and serialized again. Every other value is
written as ``json.dumps(value, ensure_ascii=False)`` would write it, so that an answer reads, as JSON, the
same as ``Shape.render``'s dict: the tests compare the two.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import lru_cache
from json.encoder import encode_basestring  # what json.dumps uses for text with ensure_ascii=False
from operator import attrgetter
from typing import Any

from flask import Response

from queuelog.api.shapes import Field, Shape

Text = Callable[[Any], str]
EMPTY: frozenset[str] = frozenset()


def dumps(value: Any) -> str:
    """Any value as JSON text, non-ASCII kept (the API's one serialization)."""
    return json.dumps(value, ensure_ascii=False)


def text_or_null(value: str | None) -> str:
    return "null" if value is None else encode_basestring(value)


def int_or_null(value: int | None) -> str:
    """A nullable integer (``batch_id``, ``progress``) as JSON text, without ``json.dumps``."""
    return "null" if value is None else int.__repr__(value)


def stored_json(value: str | None) -> str:
    """A payload or result: the stored JSON text itself."""
    return "null" if value is None else value


def _field_text(field: Field) -> Text:
    """How ``field``'s value is written: its own ``text`` if it declares one, else from its schema."""
    if field.text is not None:
        return field.text
    kind = field.schema.get("type")
    if field.out is None:
        if kind == "integer":
            return int.__repr__
        if kind == ["integer", "null"]:
            return int_or_null
        if kind in ("string", ["string", "null"]):
            return text_or_null  # null-safe even where the schema says string: never a 500 for it
    out = field.out
    return dumps if out is None else lambda value: dumps(out(value))


class _Plan:
    """One shape without some fields: the record's values in one call, and each one's prefix and writer."""

    def __init__(self, shape: Shape, omit: frozenset[str]):
        keys = [key for key in shape.fields if key not in omit]
        getter = attrgetter(*keys)
        self.values: Callable[[Any], tuple[Any, ...]] = (
            getter if len(keys) > 1 else lambda record: (getter(record),)
        )
        self.parts = tuple((f"{encode_basestring(key)}: ", _field_text(shape.fields[key])) for key in keys)

    def render(self, record: Any) -> str:
        values = self.values(record)
        members = [prefix + text(value) for (prefix, text), value in zip(self.parts, values, strict=True)]
        return "{" + ", ".join(members) + "}"


@lru_cache(maxsize=64)
def _plan(shape: Shape, omit: frozenset[str]) -> _Plan:
    return _Plan(shape, omit)


def render_json(shape: Shape, record: Any, omit: frozenset[str] = EMPTY) -> str:
    """``record`` (a job or event record: fields read as attributes) as a JSON object of ``shape``,
    without the fields in ``omit``."""
    return _plan(shape, omit).render(record)


def json_array(items: Iterable[str]) -> str:
    """JSON texts as one JSON array."""
    return "[" + ", ".join(items) + "]"


def json_object(members: dict[str, str]) -> str:
    """An object from its members' names and their JSON texts, in that order."""
    return "{" + ", ".join(f"{encode_basestring(key)}: {value}" for key, value in members.items()) + "}"


def json_text_response(text: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """An answer whose body is already JSON text; like every JSON answer it ends with a newline."""
    response = Response(text + "\n", status=status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
