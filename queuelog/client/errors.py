"""The producer client's errors: one class per problem type the JSON API documents (docs/api.md#authentication-and-errors),
all under ``QueuelogError``, plus the outcomes of ``Client.wait`` that are not a finished job's result and ``wait_batch``'s timeout.

The server answers every error with an RFC 9457 problem document whose ``type`` is ``/problems/<slug>``;
the slug picks the class. An answer that is not a problem document (a proxy's HTML 502, say) is taken as
RFC 9457 takes a problem without a type, ``about:blank``: the class comes from the HTTP status, the title
from the status's reason phrase, the detail from the start of the body.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, NamedTuple

from queuelog.client.shapes import Batch
from queuelog.wire.job import Job
from queuelog.wire.transport import MAX_BODY_IN_MESSAGE

BLANK = "about:blank"


class FieldError(NamedTuple):
    """One invalid input of a 422: its path (``payload.to``, ``jobs[3].type``, a header) and what is wrong."""

    field: str
    message: str


class QueuelogError(Exception):
    """Anything the client raises. For a refusal by the server: ``status`` (the HTTP status), ``type`` (the
    problem's slug, e.g. "not-found", or "about:blank" for an answer that was no problem document),
    ``title``, ``detail``, ``errors`` (the fields a 422 names) and ``body`` (the answer, decoded).
    ``status`` and ``type`` are None when there was no answer (``ConnectionFailed``) or no request
    (the outcomes of ``wait``)."""

    slug: str | None = None  # the problem type this class stands for

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        type: str | None = None,
        title: str = "",
        errors: list[FieldError] | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ):
        super().__init__(f"HTTP {status} {title}: {detail}" if status else f"{title}: {detail}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.body = body
        self.retry_after = retry_after  # seconds, from a Retry-After header (429, 503)
        self.attempts = 1  # how many times the client sent the request (set by Client.request)


class ValidationFailed(QueuelogError):
    """422: the request broke an input rule; ``errors`` names each field."""

    slug = "validation-failed"


class IdempotencyKeyReused(QueuelogError):
    """422: this idempotency key was used before, by you, with other parameters."""

    slug = "idempotency-key-reused"


class MalformedRequest(QueuelogError):
    """400: the request could not be read (malformed JSON, say)."""

    slug = "malformed-request"


class Unauthorized(QueuelogError):
    """401: the API key is missing, unknown or revoked."""

    slug = "unauthorized"


class Forbidden(QueuelogError):
    """403: the key may not do this (a worker key enqueueing, a producer asking for priority high)."""

    slug = "forbidden"


class NotFound(QueuelogError):
    """404: no such job, or not one this key may see."""

    slug = "not-found"


class MethodNotAllowed(QueuelogError):
    """405."""

    slug = "method-not-allowed"


class InvalidState(QueuelogError):
    """409: the job's state does not allow it (cancelling a job that is no longer pending)."""

    slug = "invalid-state"


class NotLeaseHolder(QueuelogError):
    """409: a report for a job this worker does not hold (the worker's endpoints)."""

    slug = "not-lease-holder"


class PayloadTooLarge(QueuelogError):
    """413: the request is larger than the server takes."""

    slug = "payload-too-large"


class UnsupportedMediaType(QueuelogError):
    """415."""

    slug = "unsupported-media-type"


class RateLimited(QueuelogError):
    """429: too many requests; ``retry_after`` says how long to wait when the server said so. Not
    retried by the client: a 4xx never is."""

    slug = "rate-limited"


class ServerError(QueuelogError):
    """500, or any other 5xx the client does not retry."""

    slug = "internal-error"


class Unavailable(QueuelogError):
    """502, 503 or 504 (the database is unavailable, or a proxy found no server), still so after the
    client's retries."""

    slug = "unavailable"


class ConnectionFailed(QueuelogError):
    """No answer at all (refused, dropped, timed out), still so after the client's retries."""


class JobError(QueuelogError):
    """``wait`` ended without a result: ``job`` is the job as last seen."""

    def __init__(self, job: Job, title: str, detail: str):
        super().__init__(detail, title=title)
        self.job = job


class JobFailed(JobError):
    """The job failed for good. ``job.error`` holds its last error when the key is an admin's."""


class JobCancelled(JobError):
    """The job was cancelled."""


class WaitTimeout(JobError):
    """The job had not finished when ``wait``'s timeout ran out."""


class BatchWaitTimeout(QueuelogError):
    """A batch still had unfinished members when ``wait_batch``'s timeout ran out: ``batch`` is the batch
    as last seen."""

    def __init__(self, batch: Batch, title: str, detail: str):
        super().__init__(detail, title=title)
        self.batch = batch


_BY_SLUG: dict[str, type[QueuelogError]] = {
    cls.slug: cls
    for cls in (
        ValidationFailed,
        IdempotencyKeyReused,
        MalformedRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        InvalidState,
        NotLeaseHolder,
        PayloadTooLarge,
        UnsupportedMediaType,
        RateLimited,
        ServerError,
        Unavailable,
    )
    if cls.slug
}
_BY_SLUG["malformed-json"] = MalformedRequest
_BY_STATUS: dict[int, type[QueuelogError]] = {
    400: MalformedRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: InvalidState,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: ValidationFailed,
    429: RateLimited,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown status"


def from_answer(status: int, body: Any, retry_after: float | None = None) -> QueuelogError:
    """The error for an answer of status 400 or more: a problem document's class and fields, or, for any
    other body, the class of its status (``QueuelogError`` itself for a status without one)."""
    problem = body if isinstance(body, dict) and isinstance(body.get("type"), str) else None
    if problem is not None:
        slug = problem["type"].rpartition("/problems/")[2] or BLANK
        title = str(problem.get("title") or _reason(status))
        detail = str(problem.get("detail") or "")
        errors = [
            FieldError(str(item.get("field", "")), str(item.get("message", "")))
            for item in problem.get("errors") or []
            if isinstance(item, dict)
        ]
        cls = _BY_SLUG.get(slug) or _BY_STATUS.get(status) or _fallback(status)
    else:
        slug, title, errors = BLANK, _reason(status), []
        text = " ".join(str(body).split()) if body is not None else ""
        detail = text[:MAX_BODY_IN_MESSAGE] or "(an empty answer)"
        cls = _BY_STATUS.get(status) or _fallback(status)
    return cls(
        detail,
        status=status,
        type=slug,
        title=title,
        errors=errors,
        body=body,
        retry_after=retry_after,
    )


def _fallback(status: int) -> type[QueuelogError]:
    return ServerError if status >= 500 else QueuelogError
