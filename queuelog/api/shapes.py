"""The parts the API's shapes (declared beside their operations: ``jobs.py``, ``workers.py``, ...) are made of.

A ``Field`` is one JSON Schema together with what that schema cannot say: the 422 message for a value that
breaks it, and a ``check`` for the rules no schema expresses (docs/api.md#input-rules). A ``Shape`` is
a JSON object of named fields; a ``ListOf`` a JSON array of one field. From these come the request checks,
the answers' rendering and ``/openapi.json`` (``registry.py``, ``openapi.py``).

A request is judged by one compiled validator (jsonschema-rs) of its whole shape. Only a body that it
refuses is walked field by field, in declared order, to name each offending field: unknown fields first,
then each field (nested ones too), then the rules between fields. The checks beyond the schema name each
field they refuse as well. One refusal names at most ``MAX_ERRORS`` fields, and the walk stops there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import jsonschema_rs

from queuelog.api.problems import MAX_ERRORS, ApiError, fields_named, refused
from queuelog.queue.errors import QueueError

Error = dict[str, Any]  # one entry of a 422's errors: {"field": ..., "message": ...}

REF = "#/components/schemas/"
NO_DEFAULT = object()
Message = str | Callable[[Any], str]

COMPONENTS: dict[str, dict[str, Any]] = {}  # named schemas that others refer to with REF + name


class Configured:
    """A part of the served document taken from the configuration (``QUEUELOG_*``) at start-up: the value
    of ``key``, or ``text`` with the configured values filled in (``str.format_map``)."""

    def __init__(self, key: str | None = None, *, text: str | None = None):
        self.key = key
        self.text = text

    def value(self, limits: Mapping[str, Any]) -> Any:
        return limits[self.key] if self.key else self.text.format_map(limits)


def fill(schema: Any, limits: Mapping[str, Any] | None) -> Any:
    """``schema`` with its ``Configured`` parts filled in from ``limits``. With ``limits=None`` they are
    left out, for the validators: descriptions and defaults never change what is valid."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if isinstance(value, Configured):
                if limits is not None:
                    out[key] = value.value(limits)
            else:
                out[key] = fill(value, limits)
        return out
    if isinstance(schema, list):
        return [fill(item, limits) for item in schema]
    return schema


def compile_schema(schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """A compiled validator of ``schema``, which may refer to the named components."""
    components = {name: fill(value, None) for name, value in COMPONENTS.items()}
    root = {**fill(schema, None), "components": {"schemas": components}}
    return jsonschema_rs.Draft202012Validator(root, validate_formats=False)


def valid(validator: jsonschema_rs.Validator, value: Any) -> bool:
    """Whether ``value`` passes. The validator holds text as UTF-8, which cannot carry a lone surrogate
    (JSON's ``"\\ud800"``): such text is judged with U+FFFF in its place, which is just as unprintable."""
    try:
        return validator.is_valid(value)
    except UnicodeEncodeError:
        return validator.is_valid(_without_surrogates(value))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """A copy of ``value`` with U+FFFF for each lone surrogate, walked without recursion (any depth)."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        node = container[key]
        if isinstance(node, str):
            container[key] = _SURROGATE.sub("\uffff", node)
        elif isinstance(node, list):
            container[key] = node = list(node)
            stack.extend((node, i) for i in range(len(node)))
        elif isinstance(node, dict):
            container[key] = node = {_SURROGATE.sub("\uffff", k): v for k, v in node.items()}
            stack.extend((node, k) for k in node)
    return root[0]


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Field:
    """One value: its JSON Schema, its 422 message, its default, a check beyond the schema, its rendering."""

    text: Callable[[Any], str] | None = None  # an answer's value as JSON text, when not the usual (render.py)

    def __init__(
        self,
        schema: dict[str, Any],
        message: Message = "is invalid",
        *,
        missing: str = "is required",
        default: Any = NO_DEFAULT,
        check: Callable[[Any, str], Any] | None = None,
        out: Callable[[Any], Any] | None = None,
    ):
        self.schema = schema
        self.message = message
        self.missing = missing
        self.check = check
        self.out = out
        if default is not NO_DEFAULT:
            schema["default"] = default
        # A configured default (a lease's length) is applied by the queue layer: the request carries None.
        self.default = None if default is NO_DEFAULT or isinstance(default, Configured) else default

    def json_schema(self) -> dict[str, Any]:
        return self.schema

    @cached_property
    def validator(self) -> jsonschema_rs.Validator:
        return compile_schema(self.json_schema())

    def explain(self, value: Any, path: str) -> ApiError:
        """The 422 for a value the schema refuses, naming each offending field."""
        return refused(self.errors(value, path, MAX_ERRORS))

    def errors(self, value: Any, path: str, room: int) -> list[Error]:
        """What is wrong with a value the schema refuses: at most ``room`` entries (at least one)."""
        message = self.message(value) if callable(self.message) else self.message
        return [{"field": path, "message": message}]

    def refusals(self, value: Any, path: str, room: int) -> list[Error]:
        """Everything wrong with ``value`` (at most ``room`` entries; none when it is fine): the schema's
        refusals, else those of the checks beyond it."""
        if not valid(self.validator, value):
            return self.errors(value, path, room)
        try:
            self.finish(value, path)
        except (ApiError, QueueError) as exc:
            return entries(exc)[:room]
        return []

    def finish(self, value: Any, path: str) -> Any:
        """A valid value after the checks no schema expresses (``None`` is never checked)."""
        return value if value is None or self.check is None else self.check(value, path)

    def parse(self, value: Any, path: str = "") -> Any:
        """``value`` checked against the declaration (a 422 naming each offending field), then
        finished: defaults filled in, the checks beyond the schema made, values converted."""
        if not valid(self.validator, value):
            raise self.explain(value, path)
        return self.finish(value, path)


def entries(exc: ApiError | QueueError) -> list[Error]:
    """The fields a refusal names, as a 422's ``errors``. A refusal that names no field (a 404, a 409) is
    raised again: it is not about the request's fields."""
    if isinstance(exc, QueueError):
        from queuelog.api.refusals import problem_of

        error = problem_of(exc)
        if error.slug != "validation-failed" or not error.errors:
            raise exc
        return error.errors
    if exc.slug != "validation-failed" or not exc.errors:
        raise exc
    return exc.errors


class ListOf(Field):
    """A JSON array of ``item``, with the one message for a value that is not such a list."""

    def __init__(
        self, item: Field, low: int, high: int, message: str, *, nullable: bool = False, description: str = ""
    ):
        schema = {"type": ["array", "null"] if nullable else "array", "minItems": low, "maxItems": high}
        schema["items"] = item.json_schema()
        if description:
            schema["description"] = description
        super().__init__(schema, message, missing=message)
        self.item = item
        self.low, self.high = low, high

    def errors(self, value: Any, path: str, room: int) -> list[Error]:
        found: list[Error] = []
        if isinstance(value, list) and self.low <= len(value) <= self.high:
            for i, item in enumerate(value):
                found += self.item.refusals(item, f"{path}[{i}]", room - len(found))
                if len(found) >= room:
                    break
        return found or super().errors(value, path, room)

    def finish(self, value: Any, path: str) -> Any:
        if value is None:
            return None
        out, found = [], []
        for i, item in enumerate(value):
            try:
                out.append(self.item.finish(item, f"{path}[{i}]"))
            except (ApiError, QueueError) as exc:
                found += entries(exc)
                if len(found) >= MAX_ERRORS:
                    break
        if found:
            raise refused(found)
        return out


class Shape(Field):
    """A JSON object of named fields (in the order the API checks them), registered as a component."""

    def __init__(
        self,
        name: str,
        description: str,
        fields: dict[str, Field],
        *,
        required: tuple[str, ...] = (),
        exclusive: tuple[str, str, str] | None = None,
        closed: bool = True,
        partial: bool = False,
        message: str = "must be a JSON object",
    ):
        schema: dict[str, Any] = {"type": "object", "description": description}
        if closed:
            schema["additionalProperties"] = False
        schema["properties"] = {key: field.json_schema() for key, field in fields.items()}
        if required:
            schema["required"] = list(required)
        if exclusive:  # both given, neither null (a null one counts as not given)
            pair = list(exclusive[:2])
            schema["not"] = {"required": pair, "properties": {key: {"not": {"type": "null"}} for key in pair}}
        super().__init__(schema, message)
        self.name = name
        self.fields = fields
        self.required = frozenset(required)
        self.exclusive = exclusive
        self.closed = closed
        self.partial = partial  # a patch: the parse holds only the fields given, without defaults
        self.render_plan = tuple((key, field.out) for key, field in fields.items())
        self.finish_plan = tuple(
            (key, field, field.default, field.check is not None or isinstance(field, ListOf | Shape))
            for key, field in fields.items()
        )
        COMPONENTS[name] = schema

    def json_schema(self) -> dict[str, Any]:
        return {"$ref": REF + self.name}

    def errors(self, value: Any, path: str, room: int) -> list[Error]:
        if not isinstance(value, dict):
            return [{"field": path or "body", "message": self.message}]
        found: list[Error] = []
        if self.closed:
            for key in value:
                if key not in self.fields:
                    shown = key if len(key) <= 64 else key[:64] + "…"  # no long name echoed back
                    found.append({"field": join(path, shown), "message": "unknown field"})
                    if len(found) >= room:
                        return found
        for key, field in self.fields.items():
            item = value.get(key)
            if item is None and key in self.required:
                found.append({"field": join(path, key), "message": field.missing})
            elif key in value:
                found += field.refusals(item, join(path, key), room - len(found))
            if len(found) >= room:
                return found[:room]
        if self.exclusive and all(value.get(key) is not None for key in self.exclusive[:2]):
            found.append({"field": join(path, self.exclusive[0]), "message": self.exclusive[2]})
        return found or [{"field": path or "body", "message": "is invalid"}]  # a disagreement: a bug

    def finish(self, value: dict[str, Any], path: str) -> dict[str, Any]:
        out, found = {}, []
        partial = self.partial
        for key, field, default, checked in self.finish_plan:
            if partial and key not in value:
                continue
            item = value.get(key, default)
            if item is default and type(default) is dict:
                item = dict(default)  # a fresh copy for each request, never the declaration's own
            if checked and item is not None:
                try:
                    item = field.finish(item, f"{path}.{key}" if path else key)
                except (ApiError, QueueError) as exc:
                    found += entries(exc)
                    continue
            out[key] = item
        if found:
            raise refused(found)
        return out

    def good_part(self, value: Any, refusal: ApiError, path: str = "") -> dict[str, Any]:
        """The finished values of the fields of ``value`` (at ``path`` in the body) that ``refusal`` (the
        body's 422) does not name: what a further check (the queue layer's) can still judge. None when the
        refusal is full."""
        if not isinstance(value, dict) or len(refusal.errors or ()) >= MAX_ERRORS:
            return {}
        named = fields_named(refusal, path)
        out = {}
        for key, field in self.fields.items():
            item = value.get(key)
            if key in named or key not in value or not valid(field.validator, item):
                continue
            try:
                out[key] = field.finish(item, key)
            except (ApiError, QueueError):
                continue
        return out

    def render(self, record: Mapping[str, Any], omit: frozenset[str] = frozenset()) -> dict[str, Any]:
        """An answer of this shape from a record (a row of the queue layer), as declared."""
        return {
            key: (record[key] if out is None else out(record[key]))
            for key, out in self.render_plan
            if key not in omit
        }


def printable_pattern() -> str:
    """A regular expression (ECMA-262 and Python alike) that matches exactly the strings that
    ``str.isprintable`` accepts, built from the running Python's Unicode tables (about 0.1 s, once per
    process). Astral characters are written literally (JSON carries them; ``\\U`` escapes are Python's
    alone) and matched by a second alternative, so that Python's ``re`` too takes the common case, one
    class of BMP ranges, in a single table look-up per character."""
    flags = bytes(map(str.isprintable, map(chr, range(0x110000))))
    bmp = _ranges(flags, 0, 0xFFFF, 0)
    astral = _ranges(flags, 0x10000, 0x10FFFF, 1)
    return f"^(?:[^{bmp}{_char(0x10000)}-{_char(0x10FFFF)}]|[{astral}])*$"


def _ranges(flags: bytes, low: int, high: int, wanted: int) -> str:
    """A character class body for the code points in ``low..high`` whose flag is ``wanted``."""
    parts = []
    for run in re.finditer(b"\\x01+" if wanted else b"\\x00+", flags[low : high + 1]):
        first, last = low + run.start(), low + run.end() - 1
        parts.append(_char(first) if first == last else f"{_char(first)}-{_char(last)}")
    return "".join(parts)


def _char(cp: int) -> str:
    return f"\\u{cp:04x}" if cp <= 0xFFFF else chr(cp)
