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


def invalid(field: str, message: str) -> ApiError:
    """A 422 naming one field."""
    return ApiError(
        422, "validation-failed", f"{field}: {message}", errors=[{"field": field, "message": message}]
    )


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
