"""The allowlist of job types: which names may be enqueued, their payload schemas, pausing."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012
from sqlalchemy.exc import IntegrityError

from queuelog.access.refusals import Refused
from queuelog.engines import engine_for
from queuelog.inputs import TYPE_NAME_MAX_LENGTH, TYPE_NAME_PATTERN, text_problem
from queuelog.models import AuditLog, JobType
from queuelog.queue.admin import audit_row
from queuelog.queue.errors import Code, JobTypeNotFound, JobValidationError, refuse_each
from queuelog.queue.inputs import check_storable
from queuelog.queue.limits import LIMIT_FIELDS, change_summary, limit_changes

if TYPE_CHECKING:
    from queuelog.db import Database
    from queuelog.engines.records import JobTypeAudit
    from queuelog.queue.spec import JobSpec

NAME_MAX_LENGTH = TYPE_NAME_MAX_LENGTH
MAX_DESCRIPTION = 2000  # characters
NAME_PATTERN = TYPE_NAME_PATTERN


MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_BYTES = 65_536  # the schema serialized compactly as UTF-8, as a payload is measured
MAX_SCHEMA_VISITS = 256  # subschemas one value of a payload may be checked against
_PAYLOAD_LEVELS = 32  # how deep payloads go (the default limit), for counting visits below the top
_MAX_CHAIN = 300  # subschemas entered one inside another (references included) while counting
_REF_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


def _refuse_retrieval(uri: str):
    """The registry's retriever: queuelog never fetches a schema from a file or the network."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy reads without its fields


_NO_RETRIEVAL = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]  # the same


def _refuse_fetch(uri: str):
    """jsonschema-rs's retriever, for the same reason."""
    raise LookupError(f"{uri} is not fetched")


class _Unusable(Exception):
    """A saved schema the validator cannot compile (saved before a rule of ``check_schema`` existed)."""


def _compile(schema: Any) -> jsonschema_rs.Validator:
    """The payload validator: jsonschema-rs, whose ``pattern`` and ``patternProperties`` run on the
    ``regex`` crate, in time linear in the text (no lookaround, no backreferences), and whose
    ``uniqueItems`` hashes. Formats are annotations, as JSON Schema 2020-12 has them."""
    return jsonschema_rs.validator_for(
        schema,
        validate_formats=False,
        pattern_options=jsonschema_rs.RegexOptions(),
        retriever=_refuse_fetch,
    )


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> jsonschema_rs.Validator:
    """The compiled validator of a saved schema, once per process; a schema saved before ``check_schema``
    counted its visits is counted here too, so that it cannot make an enqueue take exponential time."""
    schema = json.loads(schema_text)
    try:
        validator = _compile(schema)
        _Expansion(_NO_RETRIEVAL.resolver_with_root(Resource.from_contents(schema, DRAFT202012))).most_visits(
            schema
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError, Unresolvable) as exc:
        raise _Unusable(str(exc)) from None
    except _TooCostly:
        raise _Unusable("too costly") from None
    return validator


class SchemaFault(StrEnum):
    """Why a payload schema cannot be saved (the pattern of ``queuelog.access.refusals``; parameters beside)."""

    NOT_OBJECT = "schema_not_object"
    BAD_TEXT = "schema_bad_text"  # a name or a string that cannot be stored
    NOT_FINITE = "schema_not_finite"
    TOO_DEEP = "schema_too_deep"  # limit: levels
    REMOTE_REF = "schema_remote_ref"  # ref: a reference outside the schema
    UNRESOLVABLE_REF = "schema_unresolvable_ref"  # ref
    INVALID = "schema_invalid"  # reason: the JSON Schema library's own (English) words
    TOO_LARGE = "schema_too_large"  # size, limit: bytes
    BAD_PATTERN = "schema_bad_pattern"  # pattern: one that linear-time matching cannot run
    TOO_COSTLY = "schema_too_costly"  # limit: subschemas one payload value would be checked against


class SchemaRefused(Refused):
    """A payload schema refused when saved (``field`` is ``payload_schema``). Its message is the English
    the command line prints; the admin pages word the code (``queuelog.web.refusals``)."""

    code: SchemaFault

    def __init__(self, code: SchemaFault, message: str, **params: Any) -> None:
        super().__init__(code, message, field="payload_schema", **params)


def _check_settings(settings: dict[str, Any]) -> None:
    """The ``description`` and ``payload_schema`` among a type's settings, when given: a description of at
    most ``MAX_DESCRIPTION`` characters the databases can store, a schema ``check_schema`` accepts."""
    description = settings.get("description")
    if description is not None:
        if len(description) > MAX_DESCRIPTION:
            raise JobValidationError(Code.TOO_LONG, field="description", limit=MAX_DESCRIPTION)
        check_storable(description, "description")
    if (schema := settings.get("payload_schema")) is not None and (problem := check_schema(schema)):
        raise problem


def schema_too_deep() -> SchemaRefused:
    return SchemaRefused(
        SchemaFault.TOO_DEEP, f"is nested more than {MAX_SCHEMA_DEPTH} levels deep", limit=MAX_SCHEMA_DEPTH
    )


def check_schema(schema: Any) -> SchemaRefused | None:
    """Return why ``schema`` is not a usable payload schema, or None when it is.

    Beyond the JSON Schema meta-schema (as jsonschema-rs, which applies it, reads it): at most
    ``MAX_SCHEMA_DEPTH`` levels and ``MAX_SCHEMA_BYTES``, storable text, references only within the schema
    itself (``#...``) that resolve, since nothing is ever retrieved, patterns a linear-time matcher takes,
    and at most ``MAX_SCHEMA_VISITS`` subschemas for any one value of a payload (``_Expansion``): so that
    applying a saved schema costs time linear in the payload."""
    if not isinstance(schema, dict):
        return SchemaRefused(SchemaFault.NOT_OBJECT, "must be a JSON object")
    refs = []
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list) and depth > MAX_SCHEMA_DEPTH:
            return schema_too_deep()
        if isinstance(node, dict):
            for key, value in node.items():
                if text_problem(key):
                    return SchemaRefused(SchemaFault.BAD_TEXT, f"a name {text_problem(key)}")
                if key in _REF_KEYWORDS and isinstance(value, str):
                    refs.append(value)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str) and text_problem(node):
            return SchemaRefused(SchemaFault.BAD_TEXT, f"a string {text_problem(node)}")
        elif isinstance(node, float) and not math.isfinite(node):  # PostgreSQL's json has no NaN
            return SchemaRefused(SchemaFault.NOT_FINITE, "numbers must be finite (no NaN, Infinity or 1e400)")
    for ref in refs:
        if not ref.startswith("#"):
            return SchemaRefused(
                SchemaFault.REMOTE_REF,
                f"refers to {ref[:200]!r}: only references within the schema (#...) are allowed",
                ref=ref[:200],
            )
    resolver = _NO_RETRIEVAL.resolver_with_root(Resource.from_contents(schema, DRAFT202012))
    for ref in refs:
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return SchemaRefused(
                SchemaFault.UNRESOLVABLE_REF,
                f"the reference {ref[:200]!r} points at nothing in the schema",
                ref=ref[:200],
            )
    size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_SCHEMA_BYTES:
        return SchemaRefused(
            SchemaFault.TOO_LARGE,
            f"is {size} bytes long, more than {MAX_SCHEMA_BYTES}",
            size=size,
            limit=MAX_SCHEMA_BYTES,
        )
    try:
        _compile(schema)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        pattern = getattr(exc, "instance", None)
        path = list(getattr(exc, "schema_path", ()))
        if (
            isinstance(pattern, str)
            and path
            and (path[-1] == "pattern" or path[-2:-1] == ["patternProperties"])
        ):
            return SchemaRefused(
                SchemaFault.BAD_PATTERN,
                f"the pattern {pattern[:200]!r} cannot be used: patterns are matched in time linear in the"
                " text, which rules out lookaround and backreferences",
                pattern=pattern[:200],
            )
        reason = str(getattr(exc, "message", exc))[:300]
        return SchemaRefused(SchemaFault.INVALID, f"not a valid JSON Schema: {reason}", reason=reason)
    try:
        _Expansion(resolver).most_visits(schema)
    except _TooCostly:
        return schema_too_costly()
    except Unresolvable as exc:
        ref = str(getattr(exc, "ref", ""))[:200]
        return SchemaRefused(
            SchemaFault.UNRESOLVABLE_REF, f"the reference {ref!r} points at nothing in the schema", ref=ref
        )
    return None


def schema_too_costly() -> SchemaRefused:
    return SchemaRefused(
        SchemaFault.TOO_COSTLY,
        f"would check one value of a payload against more than {MAX_SCHEMA_VISITS} subschemas (counted"
        " through $ref, allOf, anyOf, oneOf, not, if/then/else and the like, or a reference that leads"
        " back to itself)",
        limit=MAX_SCHEMA_VISITS,
    )


class _TooCostly(Exception):
    pass


_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")
_BELOW = ("properties", "additionalProperties", "patternProperties", "unevaluatedProperties", "propertyNames")
_BELOW_IN_ARRAYS = ("prefixItems", "items", "additionalItems", "contains", "unevaluatedItems")
_APPLICATORS = frozenset(
    (*_IN_PLACE_ONE, *_IN_PLACE_MANY, *_IN_PLACE_MAPS, *_REF_KEYWORDS, *_BELOW, *_BELOW_IN_ARRAYS)
)


class _Expansion:
    """How many subschemas one value of a payload can be checked against, at worst: a validator walks
    every ``allOf``/``anyOf``/``oneOf`` branch, ``not``, ``if``/``then``/``else`` and ``$ref`` in place,
    so that a few ``$defs`` whose ``allOf`` names the one below twice make 2**n visits. Counted per
    (subschema, payload level) once (memoised), so the count itself takes time linear in the schema.

    ``visits(node, d)``: the most subschema visits one payload value ``d`` levels below the value
    ``node`` is applied to can receive. A child value takes at most one of ``properties`` (or
    ``additionalProperties``) and of ``prefixItems``/``items``, plus every ``patternProperties``,
    ``contains``, ``unevaluated*`` and ``propertyNames``."""

    def __init__(self, resolver: Any) -> None:
        self.root_resolver = resolver
        self.root: Any = None
        self.memo: dict[tuple[int, int], int] = {}
        self.active: set[tuple[int, int]] = set()
        self.targets: dict[tuple[Any, str], tuple[Any, Any]] = {}
        self.shapes: dict[int, _Shape | None] = {}

    def most_visits(self, schema: Any) -> int:
        self.root = schema
        return max(self.visits(schema, d, self.root_resolver) for d in range(_PAYLOAD_LEVELS))

    def visits(self, node: Any, d: int, resolver: Any) -> int:
        key = (id(node), d)
        if key in self.memo:
            return self.memo[key]
        shape = self._shape(node, resolver)
        if shape is None:  # true, false or a subschema applying nothing: once, and nothing below
            return 1 if d == 0 else 0
        if key in self.active or len(self.active) >= _MAX_CHAIN:  # a loop that never descends
            raise _TooCostly
        self.active.add(key)
        total = 1 if d == 0 else 0
        for child, child_resolver in shape.in_place:
            total += self.visits(child, d, child_resolver)
            if total > MAX_SCHEMA_VISITS:
                raise _TooCostly
        if d > 0:
            total += max(
                self._below(shape.as_object, d - 1, shape.resolver),
                self._below(shape.as_array, d - 1, shape.resolver),
            )
        if total > MAX_SCHEMA_VISITS:
            raise _TooCostly
        self.active.discard(key)
        self.memo[key] = total
        return total

    def _below(self, groups: tuple[list, list], e: int, resolver: Any) -> int:
        """One child value's visits: the most of the subschemas it takes one of, plus all it takes each."""
        one_of, each = groups
        return max((self.visits(c, e, resolver) for c in one_of), default=0) + sum(
            self.visits(c, e, resolver) for c in each
        )

    def _shape(self, node: Any, resolver: Any) -> _Shape | None:
        """What ``node`` applies, in place and below, worked out once per subschema."""
        if id(node) in self.shapes:
            return self.shapes[id(node)]
        shape = None
        if isinstance(node, dict) and node.keys() & _APPLICATORS:
            if isinstance(node.get("$id"), str) and node is not self.root:
                resolver = resolver.in_subresource(DRAFT202012.create_resource(node))

            def present(*names: str) -> list:
                return [node[name] for name in names if name in node]

            def listed(name: str) -> list:
                value = node.get(name)
                return value if isinstance(value, list) else []

            def mapped(name: str) -> list:
                value = node.get(name)
                return (
                    [v for v in value.values() if isinstance(v, dict | bool)]
                    if isinstance(value, dict)
                    else []
                )

            in_place = [(child, resolver) for child in present(*_IN_PLACE_ONE)]
            in_place += [(child, resolver) for name in _IN_PLACE_MANY for child in listed(name)]
            in_place += [(child, resolver) for name in _IN_PLACE_MAPS for child in mapped(name)]
            in_place += [
                self._lookup(resolver, ref) for ref in present(*_REF_KEYWORDS) if isinstance(ref, str)
            ]
            anchor = node.get("$dynamicRef")
            if isinstance(anchor, str) and "#" in anchor:  # may land on any $dynamicAnchor of that name
                found = self._dynamic_anchors(anchor.split("#", 1)[1])
                in_place += [(child, self.root_resolver) for child in found]
            items = node.get("items")
            shape = _Shape(
                resolver,
                in_place,
                (
                    mapped("properties") + present("additionalProperties"),
                    mapped("patternProperties") + present("unevaluatedProperties", "propertyNames"),
                ),
                (
                    listed("prefixItems")
                    + (items if isinstance(items, list) else present("items"))
                    + present("additionalItems"),
                    present("contains", "unevaluatedItems"),
                ),
            )
        self.shapes[id(node)] = shape
        return shape

    def _lookup(self, resolver: Any, ref: str) -> tuple[Any, Any]:
        """A reference's target and its resolver, looked up once per base URI (a lookup costs far more
        than a visit is counted)."""
        key = (getattr(resolver, "_base_uri", None), ref)
        if key not in self.targets:
            resolved = resolver.lookup(ref)
            self.targets[key] = (resolved.contents, resolved.resolver)
        return self.targets[key]

    def _dynamic_anchors(self, name: str) -> list[dict]:
        found, stack = [], [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("$dynamicAnchor") == name:
                    found.append(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return found


@dataclass(frozen=True)
class _Shape:
    """A subschema's applicators: those applied to the same value (with their resolvers), and for one
    child value of an object and of an array, the subschemas it takes one of and those it takes each."""

    resolver: Any
    in_place: list[tuple[Any, Any]]
    as_object: tuple[list, list]
    as_array: tuple[list, list]


ITEM: Callable[[int], str] = "jobs[{}].".format  # how a refusal names a field of a batch's item i


def _alone(index: int) -> str:
    return ""


class JobTypeRules:
    """Reads the allowlist and checks specs against it; admin changes go through the same object.

    The allowlist is read at most once per ``ttl`` seconds per process (it is tiny and read on every
    enqueue). A change made through this object takes effect at once in this process; in other app
    processes it takes effect within ``ttl`` seconds.
    """

    def __init__(self, db: Database, ttl: float = 2.0):
        self.db = db
        self.engine = engine_for(db)
        self.ttl = ttl
        self._cache: tuple[float, dict[str, tuple[bool, str | None]]] | None = None

    def invalidate(self) -> None:
        self._cache = None

    def _load(self) -> dict[str, tuple[bool, str | None]]:
        now = time.monotonic()
        if self._cache is not None and now - self._cache[0] < self.ttl:
            return self._cache[1]
        out = {row.name: (row.enabled, row.payload_schema) for row in self.engine.job_types()}
        self._cache = (now, out)
        return out

    def check(self, specs: Sequence[JobSpec], *, listed: bool = False) -> None:
        """Raise ``JobValidationError`` unless every spec names an enabled type and fits its schema; for
        several refused specs, ``InvalidValues`` naming each. ``listed``: the specs came as a list (a batch),
        whose items the refusals name ``jobs[i].field``, even a list of one."""
        refuse_each(self.refusals(specs, ITEM if listed else _alone))

    def refusals(self, specs: Sequence[JobSpec], prefix: Callable[[int], str]) -> list[JobValidationError]:
        """Each spec's refusal, if it has one, its fields named after ``prefix(index)``."""
        rules = self._load()
        return [
            refusal
            for index, spec in enumerate(specs)
            if (refusal := self._refusal(rules, spec, prefix(index))) is not None
        ]

    @staticmethod
    def _refusal(
        rules: dict[str, tuple[bool, str | None]], spec: JobSpec, prefix: str
    ) -> JobValidationError | None:
        """Why ``spec`` may not be enqueued (its fields named after ``prefix``), or None."""
        enabled, schema = rules.get(spec.type, (False, None))
        if not enabled:  # the allowed names are listed only when needed: this runs on every enqueue
            allowed = sorted(name for name, (on, _) in rules.items() if on)
            return JobValidationError(
                Code.UNKNOWN_TYPE, field=f"{prefix}type", type=spec.type, allowed=allowed
            )
        if schema is None:
            return None
        try:
            # The first error only: jsonschema-rs collects them all before iterating.
            _validator(schema).validate(spec.payload)
        except jsonschema_rs.ValidationError as error:
            path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.instance_path)
            reason = error.message if len(error.message) <= 300 else error.message[:299] + "…"
            return JobValidationError(Code.SCHEMA_MISMATCH, field=f"{prefix}payload{path}", reason=reason)
        except (_Unusable, ValueError, TypeError, OverflowError):
            # A schema saved before ``check_schema`` refused what cannot be compiled.
            return JobValidationError(Code.SCHEMA_UNUSABLE, field=f"{prefix}type", type=spec.type)
        return None

    # -- management (admins, CLI) -------------------------------------------------------------------

    def all(self) -> list[JobType]:
        return self.engine.all_job_types()

    def create(self, name: str, actor: str, description: str = "", schema: Any = None) -> JobType:
        """Add an enabled type, recorded in the audit log as ``type.create`` by ``actor`` in the same
        transaction (the JSON API, the command line and the types page add types here). A name not of
        ``NAME_PATTERN`` is ``BAD_TYPE_NAME``, a taken one ``TYPE_EXISTS`` (both on ``name``); a schema
        ``check_schema`` refuses raises its ``SchemaRefused``."""
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):  # "$" alone lets "a\n" by
            raise JobValidationError(Code.BAD_TYPE_NAME, field="name", max_length=NAME_MAX_LENGTH)
        _check_settings({"description": description, "payload_schema": schema})
        entry = audit_row(actor, "type.create", name)
        try:
            return self.add(name, description, schema, audit=entry)
        except IntegrityError:
            if all(t.name != name for t in self.all()):
                raise  # not the name: another constraint refused the change
            raise JobValidationError(Code.TYPE_EXISTS, field="name", name=name) from None

    def add(
        self, name: str, description: str = "", schema: Any = None, *, audit: AuditLog | None = None
    ) -> JobType:
        """Add an enabled type as given, unchecked (``create`` checks and audits); a taken name raises
        SQLAlchemy's ``IntegrityError``."""
        job_type = self.engine.add_job_type(name, description, schema, audit=audit)
        self.invalidate()
        return job_type

    def get(self, name: str) -> JobType:
        """The type ``name``; ``JobTypeNotFound`` (a ``LookupError``) when there is none."""
        job_type = next((t for t in self.all() if t.name == name), None)
        if job_type is None:
            raise JobTypeNotFound(name)
        return job_type

    def update(self, name: str, **changes: Any) -> JobType:
        """Change ``description``, ``payload_schema``, ``enabled`` or ``paused`` of an existing type, and its
        limits (``concurrency_limit``, ``rate_limit``, ``rate_period``; checked by ``limit_changes``, which
        may raise ``InvalidValues``). An unknown type raises ``JobTypeNotFound`` (a ``LookupError``)."""
        return self._write(name, changes)

    def change(self, name: str, actor: str, *, action: str = "type.update", **changes: Any) -> JobType:
        """``update``, recorded in the audit log as ``action`` by ``actor`` with what changed, in the
        change's own transaction (the JSON API, the command line and the pages change types here; the
        pages' enable, disable, pause and resume buttons name their own actions, ``type.pause`` ...)."""

        def audited(before: JobType, applied: dict[str, Any]) -> AuditLog:
            return audit_row(actor, action, name, change_summary(before, applied))

        return self._write(name, changes, audited)

    def _write(self, name: str, changes: dict[str, Any], audit_row: JobTypeAudit | None = None) -> JobType:
        if text_problem(name):  # a NUL or a lone surrogate: no type has one, and PostgreSQL cannot compare it
            raise JobTypeNotFound(name)
        _check_settings(changes)
        limits = {key: changes.pop(key) for key in LIMIT_FIELDS if key in changes}

        def settled(current: JobType) -> dict[str, Any]:
            # Worked out on the type as the engine holds it locked: a rate limit given alone keeps the
            # period found there, even when another admin has just changed it.
            return {**changes, **limit_changes(current, limits)} if limits else changes

        job_type = self.engine.update_job_type(name, settled, audit=audit_row)
        if job_type is None:
            raise JobTypeNotFound(name)
        self.invalidate()
        return job_type

    def set_limits(self, name: str, actor: str, **limits: Any) -> JobType:
        """Set or remove (None) any of ``concurrency_limit``, ``rate_limit`` and ``rate_period``."""
        unknown = set(limits) - set(LIMIT_FIELDS)
        if unknown:
            raise TypeError(f"not a limit: {', '.join(sorted(unknown))}")
        return self.change(name, actor, **limits)

    def seed(self, names: str) -> None:
        """Fill an empty allowlist from a comma-separated list (``QUEUELOG_JOB_TYPES``)."""
        if self.engine.seed_job_types(list(dict.fromkeys(n.strip() for n in names.split(",") if n.strip()))):
            self.invalidate()
