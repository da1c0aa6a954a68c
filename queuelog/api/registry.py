"""Every operation of the JSON API, declared once (docs/api.md).

``@operation(...)`` on a view says its method and path, who may call it, its request (body, query, headers),
its answers with their status codes, whether it honours ``Prefer: return=minimal``, and its summary. From
that one declaration, at import time, come the Flask route on the blueprint, the role check (its 403 says
"this key may not <to>.", written here, never taken from a docstring: ``python -OO`` drops those), the
parse of the request against its shapes (``shapes.py``: a 422 naming each bad field, at most
``MAX_ERRORS``), and the operation's entry in ``/openapi.json`` (``openapi.py``). A view is called with
the path's values, the parsed ``body``, ``query`` and headers, and ``minimal`` where declared; the caller
is ``g.principal``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flask import g, request

from queuelog.api.answers import JOB, JOB_STATE, PROBLEM
from queuelog.api.base import bp, caller, wants_minimal
from queuelog.api.problems import ApiError, refused
from queuelog.api.shapes import REF, Configured, Field, Shape
from queuelog.api.validation import header_text, query_values, read_body

KINDS = ("worker", "producer", "admin")  # "producer": any user's key; "admin": an admin's key

# -- the parts of the operations' OpenAPI entries -------------------------------------------------------


def schema_of(shape: Shape | str) -> dict[str, Any]:
    return {"$ref": REF + (shape if isinstance(shape, str) else shape.name)}


def problem(description: str | Configured) -> dict[str, Any]:
    """An answer that is a problem (RFC 9457), with its description."""
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": schema_of(PROBLEM)}},
    }


def json_answer(description: str, schema: dict[str, Any] | Shape, headers: dict | None = None) -> dict:
    """An ``application/json`` answer of ``schema`` (a shape, or a schema such as ``either``'s)."""
    if isinstance(schema, Shape):
        schema = schema_of(schema)
    out = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def either(*shapes: Shape | str) -> dict[str, Any]:
    """An answer of one of ``shapes`` (the full job, or the compact one Prefer: return=minimal asks for)."""
    return {"anyOf": [schema_of(shape) for shape in shapes]}


def path_parameter(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def location(what: str) -> dict[str, Any]:
    return {"Location": {"description": f"The {what}'s URL", "schema": {"type": "string"}}}


COMMON = {
    "400": problem("Malformed JSON"),
    "401": problem("Missing, unknown or revoked API key"),
    "413": problem(Configured(text="The request is larger than {MAX_REQUEST_BYTES:,} bytes")),
    "415": problem("The body is not application/json, or it is compressed"),
    "422": problem("Invalid input; `errors` names each field"),
    "503": problem("The database is unavailable or busy; try again (Retry-After)"),
}
JOB_ID = path_parameter("job_id", "ASCII digits only, at most 18 of them.", {"type": "integer", "minimum": 1})
PREFER = {
    "name": "Prefer",
    "in": "header",
    "schema": {"type": "string", "examples": ["return=minimal"]},
    "description": "return=minimal (RFC 7240) asks for the compact answer a worker needs; the answer then "
    "says Preference-Applied: return=minimal. Without it, or with return=representation, whole jobs.",
}
APPLIED = {
    "Preference-Applied": {
        "description": "return=minimal when the compact answer was given",
        "schema": {"type": "string", "enum": ["return=minimal"]},
    }
}
JOB_ANSWER = json_answer("The job", JOB)
NOT_FOUND = problem("No such job, or one the caller may not see")
NOT_HOLDER = problem("The caller does not hold the job's lease (not-lease-holder), whatever its state")


def reported(description: str) -> dict[str, Any]:
    """A worker's report's answer: the job, or with Prefer: return=minimal where it stands (JobState)."""
    return json_answer(description, either(JOB, JOB_STATE), APPLIED)


# -- the declarations -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """A request header: its name, the field that judges it and the view's argument that receives it."""

    name: str
    field: Field
    argument: str


@dataclass
class Operation:
    method: str
    rule: str  # the Flask rule: /jobs/<jobid:job_id>
    who: tuple[str, ...] | None  # the kinds of key let through; None: the view decides (no key, metrics)
    to: str  # "this key may not <to>."
    summary: str
    answers: dict[str, dict[str, Any]]
    body: Shape | None = None
    query: Shape | None = None
    headers: tuple[Header, ...] = ()
    params: tuple[dict[str, Any], ...] = ()  # the path's parameters, as OpenAPI has them
    minimal: bool = False
    public: bool = False  # needs no key at all
    common: bool = True  # the answers every keyed operation may give (COMMON)
    # (the body's 422, the raw body, the path's values) -> the 422 with what else the queue layer refuses
    refused: Callable[..., ApiError] | None = None

    @property
    def path(self) -> str:
        """The OpenAPI path: /jobs/{job_id}."""
        return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", self.rule)

    def openapi(self) -> dict[str, Any]:
        """This operation's entry under its path in ``/openapi.json``."""
        answers = dict(self.answers)
        if self.who is not None:
            answers.setdefault("403", problem(f"The key's kind or role may not do this: {self.refusal}"))
        if self.common:
            answers |= {status: answer for status, answer in COMMON.items() if status not in answers}
        op: dict[str, Any] = {"summary": self.summary, "responses": answers}
        if self.body is not None:
            content = {"application/json": {"schema": schema_of(self.body)}}
            op["requestBody"] = {"required": bool(self.body.required), "content": content}
        parameters = [*self.params]
        parameters += [
            {"name": h.name, "in": "header", "schema": h.field.json_schema()} for h in self.headers
        ]
        if self.query is not None:
            parameters += [
                {"name": key, "in": "query", "schema": value.json_schema()}
                for key, value in self.query.fields.items()
            ]
        if self.minimal:
            parameters.append(PREFER)
        if parameters:
            op["parameters"] = parameters
        if self.public:
            op["security"] = []
        return op

    @property
    def refusal(self) -> str:
        return f"this key may not {self.to}."


OPERATIONS: list[Operation] = []
EMPTY_BODY = Shape("EmptyBody", "No fields: an empty body or {}.", {})  # a malformed body is still refused


def operation(method: str, rule: str, **declared: Any) -> Callable[[Callable], Callable]:
    """Declare the decorated view as one operation (see the module's doc) and register its route."""

    def decorator(view: Callable) -> Callable:
        op = Operation(method, rule, **declared)
        variables = set(re.findall(r"<(?:\w+:)?(\w+)>", rule))
        described = {p["name"] for p in op.params}
        loose = op.body is None and (op.refused or op.headers)  # both are judged with the body
        if variables != described or not set(op.who or ()) <= set(KINDS) or loose:
            raise TypeError(f"{method} {rule}: path parameters, kinds of key or body are declared amiss")
        OPERATIONS.append(op)
        bp.add_url_rule(rule, view.__name__, _handler(op, view), methods=[method])
        return view

    return decorator


def _handler(op: Operation, view: Callable) -> Callable:
    """The view behind the route: everything the declaration says is decided here, once, so that a
    request does only the checks and parses its operation needs."""
    who = op.who
    worker, producer, admin = ((kind in who) for kind in KINDS) if who is not None else (False,) * 3
    refusal = op.refusal
    body, query, headers, refused, minimal = op.body, op.query, op.headers, op.refused, op.minimal

    def handler(**args: Any) -> Any:  # args: the path's values
        if who is not None:
            principal = caller()
            if not (
                (worker and principal.is_worker)
                or (producer and principal.is_user)
                or (admin and principal.is_admin)
            ):
                raise ApiError(403, "forbidden", refusal)
            g.principal = principal
        if query is not None:
            args["query"] = query.parse(query_values(request.args))
        if body is not None:
            raw = read_body()
            try:
                args.update(_parsed(body, headers, raw))
            except ApiError as exc:
                if refused is None:
                    raise
                raise refused(exc, raw, **request.view_args) from None
        if minimal:
            args["minimal"] = wants_minimal()
        return view(**args)

    handler.__name__ = view.__name__
    handler.__doc__ = view.__doc__
    return handler


def _parsed(body: Any, headers: Sequence[Header], raw: dict[str, Any]) -> dict[str, Any]:
    """The body and the declared headers, parsed: their arguments of the view. Every bad field of the
    body and every bad header are named in one 422 (an unknown field and a bad Idempotency-Key, say)."""
    args: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    try:
        args["body"] = body.parse(raw)
    except ApiError as exc:
        if exc.status != 422 or not exc.errors:
            raise
        errors += exc.errors
    for header in headers:
        try:
            value = header_text(header.name)
            args[header.argument] = None if value is None else header.field.parse(value, header.name)
        except ApiError as exc:
            if exc.status != 422 or not exc.errors:
                raise
            errors += exc.errors
    if errors:
        raise refused(errors)
    return args


def paths(operations: list[Operation] = OPERATIONS) -> dict[str, Any]:
    """The ``paths`` of ``/openapi.json``: each declared operation under its path and method."""
    out: dict[str, dict[str, Any]] = {}
    for op in operations:
        item = out.setdefault(op.path, {})
        assert op.method.lower() not in item, f"{op.method} {op.path} is declared twice"
        item[op.method.lower()] = op.openapi()
    return out


def request_fields(operations: list[Operation] = OPERATIONS) -> list[Field]:
    """The request shapes and header fields of the operations, to compile their validators at start-up."""
    found = [shape for op in operations for shape in (op.body, op.query) if shape is not None]
    return found + [header.field for op in operations for header in op.headers]
