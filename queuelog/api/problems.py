"""RFC 9457 problem details: the one way the JSON API reports an error."""

from __future__ import annotations

from typing import Any

from flask import Response, json

TITLES = {
    "validation-failed": "Validation failed",
    "malformed-json": "Malformed JSON",
    "malformed-request": "Malformed request",
    "unsupported-media-type": "Unsupported media type",
    "payload-too-large": "Payload too large",
    "unauthorized": "Unauthorized",
    "forbidden": "Forbidden",
    "not-found": "Not found",
    "method-not-allowed": "Method not allowed",
    "invalid-state": "Invalid state",
    "not-lease-holder": "Not the lease holder",
    "idempotency-key-reused": "Idempotency key reused",
    "rate-limited": "Too many requests",
    "unavailable": "Service unavailable",
    "internal-error": "Internal server error",
}


class ApiError(Exception):
    """Raised anywhere in an API view; the blueprint's handler turns it into a problem response."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}

    def response(self) -> Response:
        return problem(self.status, self.slug, self.detail, errors=self.errors, headers=self.headers)


MAX_ERRORS = 20  # a refusal names at most this many fields: a body of many bad fields gets a short answer


def invalid(field: str, message: str) -> ApiError:
    """A 422 naming one field."""
    return ApiError(
        422, "validation-failed", f"{field}: {message}", errors=[{"field": field, "message": message}]
    )


def refused(errors: list[dict[str, Any]]) -> ApiError:
    """A 422 naming each bad field of a request (its first MAX_ERRORS), in the order given; the detail
    says them in one line: "field: message; field: message", or "unknown field(s): a, b"."""
    errors = errors[:MAX_ERRORS]
    if all(error["message"] == "unknown field" for error in errors):
        detail = "unknown field(s): " + ", ".join(error["field"] for error in errors)
    else:
        detail = "; ".join(f"{error['field']}: {error['message']}" for error in errors)
    return ApiError(422, "validation-failed", detail, errors=errors)


def fields_named(error: ApiError, path: str = "") -> set[str]:
    """The fields a refusal names at ``path`` of the body (the top level by default): "payload" for
    "payload.to", "jobs" for "jobs[1].type"; at path "jobs[1]", "type" for "jobs[1].type"."""
    prefix = f"{path}." if path else ""
    return {
        entry["field"][len(prefix) :].split(".")[0].split("[")[0]
        for entry in error.errors or ()
        if entry["field"].startswith(prefix)
    }


def problem(
    status: int,
    slug: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": f"/problems/{slug}",
        "title": TITLES.get(slug, slug.replace("-", " ").capitalize()),
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    response = Response(json.dumps(body) + "\n", status=status, mimetype="application/problem+json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
