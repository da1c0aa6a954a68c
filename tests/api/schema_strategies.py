"""Hypothesis strategies written from a served JSON Schema: bodies the schema accepts, and bodies it refuses
in exactly one place, with that place's path as the API names fields (``jobs[3].type``).

They know the keywords ``/openapi.json`` uses and refuse any other, so a new keyword in the document makes
the contract test fail until it is taught here. (hypothesis-jsonschema would do the first half, but its
last release does not run on current Hypothesis.)
"""

from __future__ import annotations

import calendar
import json
import math
from typing import Any

import jsonschema_rs
from hypothesis import strategies as st

KEYWORDS = {
    "$ref", "type", "enum", "anyOf", "not", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "description", "default", "examples",
}  # fmt: skip
SAMPLES = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 2.5,
    "string": "x",
    "array": [],
    "object": {},
}
# Characters that no printable text may hold: controls, format characters, separators, private use,
# an unassigned code point. Next to them, text that breaks the time stamp pattern in the ways people do.
UNPRINTABLE = [
    "\n",
    "\t",
    "\x00",
    "\x7f",
    "\x85",
    "\u200b",
    "\u202e",
    "\u2028",
    "\u3000",
    "\ue000",
    "\U000e0001",
    "\U0010fffe",
]
NOT_TIMESTAMPS = [
    "2026-01-31T12:00:00", "1999-12-31T23:59:59Z", "9001-01-01T00:00:00Z", "2026-01-31 12:00:00Z",
    "2026-01-31t12:00:00z", "2026-01-31T12:00:00,5Z", "2026-13-01T00:00:00Z", "2026-01-31T24:00:00Z",
    "2026-01-31T12:00:60Z", "2026-01-31T12:00Z", "tomorrow", "",
]  # fmt: skip
# Printable characters: letters, marks, numbers, punctuation, symbols, and the space.
PRINTABLE = st.characters(categories=["L", "M", "N", "P", "S"], include_characters=" ")
# What the described rules leave out of payloads (docs/api.md#input-rules): NUL and lone surrogates.
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


class Document:
    """A served OpenAPI document, whose schemas refer to each other by ``#/components/schemas/NAME``."""

    def __init__(self, document: dict[str, Any]):
        self.document = document
        self.schemas = document["components"]["schemas"]
        self.strategies: dict[str, st.SearchStrategy[Any]] = {}
        self.validators: dict[str, jsonschema_rs.Validator] = {}

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            target = self.schemas[schema["$ref"].rsplit("/", 1)[1]]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        unknown = set(schema) - KEYWORDS
        assert not unknown, f"teach schema_strategies the keywords {unknown}"
        return schema

    def validator(self, schema: dict[str, Any]) -> jsonschema_rs.Validator:
        """An independent judge of ``schema``, compiled from the served text."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self.validators:
            root = {**schema, "components": self.document["components"]}
            self.validators[key] = jsonschema_rs.Draft202012Validator(root)
        return self.validators[key]

    def valid(self, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        """Values that ``schema`` accepts (and that the rules it describes allow)."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self.strategies:
            self.strategies[key] = self._valid(schema)
        return self.strategies[key]

    def _valid(self, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        s = self.resolve(schema)
        if "anyOf" in s:
            return st.one_of([self.valid(branch) for branch in s["anyOf"]])
        if "enum" in s:
            return st.sampled_from(s["enum"])
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        return st.one_of([self._typed(s, kind) for kind in types])

    def _typed(self, s: dict[str, Any], kind: str) -> st.SearchStrategy[Any]:
        low, high = s.get("minimum"), s.get("maximum")
        if kind in ("null", "boolean"):
            return st.none() if kind == "null" else st.booleans()
        if kind == "integer":
            return st.integers(low, high)
        if kind == "number":
            whole = st.integers(
                None if low is None else math.ceil(low), None if high is None else math.floor(high)
            )
            return whole | st.floats(low, high, allow_nan=False, allow_infinity=False)
        if kind == "string":
            size = (s.get("minLength", 0), s.get("maxLength", 10**9))
            if _printable(s):  # Hypothesis' regex strategy takes seconds over the ~700 ranges of this one
                text = st.text(PRINTABLE, min_size=size[0], max_size=min(size[1], 40))
                text = text.filter(self.validator({"pattern": s["pattern"]}).is_valid)
            else:
                text = st.from_regex(s["pattern"], fullmatch=True) if "pattern" in s else st.text()
            text = text.filter(lambda t: size[0] <= len(t) <= size[1])
            return text.filter(_real_date) if s.get("format") == "date-time" else text
        if kind == "array":
            high = min(s.get("maxItems", 10), 10)
            return st.lists(self.valid(s["items"]), min_size=s.get("minItems", 0), max_size=high)
        assert kind == "object"
        if "properties" not in s:
            return st.dictionaries(TEXT, JSON, max_size=5)
        return self._object(s)

    def _object(self, s: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        required = set(s.get("required", ()))
        parts = {
            key: self.valid(sub) if key in required else st.none() | st.tuples(self.valid(sub))
            for key, sub in s["properties"].items()
        }
        chosen = st.fixed_dictionaries(parts).map(
            lambda d: {
                k: (v if k in required else v[0]) for k, v in d.items() if k in required or v is not None
            }
        )
        both = s.get("not", {}).get("required")
        return chosen.filter(lambda d: not both or not all(k in d for k in both))

    @st.composite
    def violation(draw, self, schema: dict[str, Any], value: Any, path: str = "", null_ok: bool = False):
        """``value`` (which ``schema`` accepts) broken in one place: (the new value, that place's path)."""
        s = self.resolve(schema)
        if "anyOf" in s:  # a nullable value: break the other branch, which null does not satisfy either
            branch = next(b for b in s["anyOf"] if b.get("type") != "null")
            base = value if value is not None else draw(self.valid(branch))
            rest = {k: v for k, v in s.items() if k != "anyOf"}
            return draw(self.violation({**branch, **rest}, base, path, null_ok=True))
        types = set(s["type"] if isinstance(s["type"], list) else [s["type"]]) if "type" in s else set()
        types |= {"null"} if null_ok and types else set()
        options: list[st.SearchStrategy[tuple[Any, str]]] = []
        if types:
            wrong = [
                v for k, v in SAMPLES.items() if k not in types and not (k == "integer" and "number" in types)
            ]
            options.append(st.sampled_from(wrong).map(lambda v: (v, path)))
        if isinstance(value, dict) and "properties" in s:
            options += self._object_violations(s, value, path)
        elif isinstance(value, list):
            options += self._array_violations(s, value, path)
        else:
            options += [st.just((bad, path)) for bad in self._leaf_violations(s, value)]
            if "pattern" in s or "enum" in s:
                judge = self.validator(s)
                options.append(
                    st.text(max_size=70).filter(lambda t: not judge.is_valid(t)).map(lambda t: (t, path))
                )
        return draw(st.one_of(options))

    def _object_violations(self, s: dict[str, Any], value: dict[str, Any], path: str) -> list:
        join = (lambda key: f"{path}.{key}") if path else (lambda key: key)
        options = []
        if s.get("additionalProperties") is False:
            unknown = TEXT.filter(lambda k: k and k not in s["properties"])
            options.append(unknown.map(lambda k: ({**value, k: 1}, join(k))))
        for key in s.get("required", ()):
            options.append(st.just(({k: v for k, v in value.items() if k != key}, join(key))))
        for key, item in value.items():
            sub = s["properties"][key]
            options.append(
                self.violation(sub, item, join(key)).map(lambda r, key=key: ({**value, key: r[0]}, r[1]))
            )
        both = s.get("not", {}).get("required")
        if both:
            # Both given and neither null: a null one counts as not given (the "not" lists them as non-null).
            pair = st.tuples(*(self.valid(s["properties"][key]) for key in both)).filter(
                lambda p: all(v is not None for v in p)
            )
            options.append(pair.map(lambda p: ({**value, **dict(zip(both, p, strict=True))}, join(both[0]))))
        return options

    def _array_violations(self, s: dict[str, Any], value: list[Any], path: str) -> list:
        options = []
        if s.get("minItems", 0) > 0:
            options.append(st.just(([], path)))
        if "maxItems" in s:
            filler = value[:1] or []
            items = self.valid(s["items"]) if not filler else st.just(filler[0])
            options.append(items.map(lambda item: ([item] * (s["maxItems"] + 1), path)))
        for i, item in enumerate(value):
            broken = self.violation(s["items"], item, f"{path}[{i}]")
            options.append(broken.map(lambda r, i=i: ([*value[:i], r[0], *value[i + 1 :]], r[1])))
        return options

    @staticmethod
    def _leaf_violations(s: dict[str, Any], value: Any) -> list[Any]:
        out: list[Any] = []
        step = 1 if "integer" in str(s.get("type")) else 0.5
        if "minimum" in s:
            out.append(s["minimum"] - step)
        if "maximum" in s:
            out += [s["maximum"] + step, s["maximum"] * 10 + 1]
        if s.get("minLength", 0) > 0:
            out.append("")
        if "maxLength" in s:
            out.append("x" * (s["maxLength"] + 1))
        if isinstance(value, str) and _printable(s):
            out += [value[: s.get("maxLength", 64) - 1] + c for c in UNPRINTABLE]
        if s.get("format") == "date-time":
            out += NOT_TIMESTAMPS
        return out


def _printable(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is the served PrintableText (whose pattern starts with a negated class)."""
    return schema.get("pattern", "").startswith("^(?:[^")


def _real_date(text: str) -> bool:
    """RFC 3339 ``date-time`` names a real calendar day (no 31 April)."""
    year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
    return day <= calendar.monthrange(year, month)[1]


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())
