"""The queue layer's refusals as the JSON API says them: one table from each code to its status, its
problem type (docs/api.md#authentication-and-errors) and its English detail.

A refusal that blames a field is a validation error: its problem carries ``errors: [{field, message}]``
(and ``allowed``, the enabled type names, for an unknown type), and its detail is ``field: message``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from queuelog.api.problems import ApiError
from queuelog.queue.errors import Code, QueueError, each_refusal


class Wording(NamedTuple):
    status: int
    slug: str
    words: Callable[[dict[str, Any]], str]  # the detail (or, for a field, the message) from the params


def _name(p: dict[str, Any]) -> str:
    """The name a request gave, quoted, and cut at 64 characters: a problem echoes no long path back."""
    name = p["name"]
    return repr(name if len(name) <= 64 else name[:64] + "…")


def _state(verb: str, allowed: str) -> Callable[[dict[str, Any]], str]:
    return lambda p: f"job {p['job_id']} is {p['status']}; only {allowed} jobs can be {verb}"


_INVALID = (422, "validation-failed")
TABLE: dict[Code, Wording] = {
    Code.JOB_NOT_FOUND: Wording(404, "not-found", lambda p: f"job {p['job_id']} does not exist"),
    Code.NOT_CANCELLABLE: Wording(409, "invalid-state", _state("cancelled", "pending or running")),
    Code.NOT_RETRYABLE: Wording(409, "invalid-state", _state("retried", "failed or cancelled")),
    Code.NOT_LEASE_HOLDER: Wording(
        409,
        "not-lease-holder",
        lambda p: f"job {p['job_id']} is not held by this worker under this lease token",
    ),
    Code.IDEMPOTENCY_KEY_REUSED: Wording(
        422,
        "idempotency-key-reused",
        lambda p: f"idempotency key already used by job {p['job_id']} with other parameters",
    ),
    Code.PRIORITY_NOT_ALLOWED: Wording(
        403, "forbidden", lambda p: "producers may enqueue low and medium priority only"
    ),
    Code.UNKNOWN_TYPE: Wording(
        *_INVALID,
        lambda p: f"unknown or disabled job type {p['type']!r}; allowed: {', '.join(p['allowed'])}",
    ),
    Code.SCHEMA_UNUSABLE: Wording(
        *_INVALID, lambda p: f"the payload schema of {p['type']!r} cannot be applied; an admin must fix it"
    ),
    Code.SCHEMA_MISMATCH: Wording(*_INVALID, lambda p: p["reason"]),
    Code.NOT_AN_OBJECT: Wording(*_INVALID, lambda p: "must be a JSON object"),
    Code.TOO_DEEP: Wording(*_INVALID, lambda p: f"nested more than {p['limit']} levels deep"),
    Code.TOO_LARGE: Wording(
        *_INVALID, lambda p: f"is {p['size']} bytes serialized; the limit is {p['limit']}"
    ),
    Code.NUL_CHARACTER: Wording(*_INVALID, lambda p: "strings may not contain the NUL character (\\u0000)"),
    Code.LONE_SURROGATE: Wording(*_INVALID, lambda p: "strings must be valid Unicode (no lone surrogates)"),
    Code.NOT_FINITE: Wording(*_INVALID, lambda p: "numbers must be finite"),
    Code.NUMBER_UNDERFLOW: Wording(
        *_INVALID,
        lambda p: "is a number too close to 0 for a 64-bit float (such as 1e-400); write 0 if 0 is meant",
    ),
    Code.NOT_PRINTABLE: Wording(*_INVALID, lambda p: "must contain only printable characters"),
    Code.TIME_OUT_OF_RANGE: Wording(*_INVALID, lambda p: "is out of range"),
    Code.SNOOZE_LIMIT: Wording(
        409,
        "invalid-state",
        lambda p: f"job {p['job_id']} was snoozed {p['limit']} times already, the limit: complete or fail it",
    ),
    Code.CANCEL_NOT_REQUESTED: Wording(
        409, "invalid-state", lambda p: f"job {p['job_id']}: its cancellation was not requested"
    ),
    Code.OUT_OF_RANGE: Wording(*_INVALID, lambda p: f"must be a number from {p['low']} to {p['high']}"),
    Code.TOO_LONG: Wording(*_INVALID, lambda p: f"must be at most {p['limit']} characters"),
    Code.SCHEDULE_NOT_FOUND: Wording(404, "not-found", lambda p: f"schedule {_name(p)} does not exist"),
    Code.SCHEDULE_CHANGING: Wording(
        409, "invalid-state", lambda p: f"schedule {_name(p)} kept changing; try again"
    ),
    Code.SCHEDULE_EXISTS: Wording(*_INVALID, lambda p: "a schedule with this name exists"),
    Code.BAD_SCHEDULE_NAME: Wording(
        *_INVALID,
        lambda p: (
            f"must be 1 to {p['max_length']} letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        ),
    ),
    Code.TIMING_NEEDED: Wording(*_INVALID, lambda p: "give exactly one of cron and interval_seconds"),
    Code.CRON_FIELDS: Wording(
        *_INVALID,
        lambda p: (
            "must have five fields (minute hour day month weekday) "
            "or be @hourly, @daily, @weekly, @monthly or @yearly"
        ),
    ),
    Code.CRON_INVALID: Wording(*_INVALID, lambda p: f"is not a valid cron expression: {p['reason']}"),
    Code.CRON_NEVER: Wording(*_INVALID, lambda p: "never matches a date"),
    Code.INTERVAL_OUT_OF_RANGE: Wording(*_INVALID, lambda p: f"must be an integer from 1 to {p['max']}"),
    Code.UNKNOWN_TIMEZONE: Wording(*_INVALID, lambda p: "is not an IANA time zone (e.g. Europe/Berlin)"),
    Code.BAD_MISSED_POLICY: Wording(*_INVALID, lambda p: f"must be {' or '.join(p['allowed'])}"),
    Code.TYPE_NOT_FOUND: Wording(404, "not-found", lambda p: f"job type {_name(p)} does not exist"),
    Code.TYPE_EXISTS: Wording(*_INVALID, lambda p: "a job type with this name exists"),
    Code.BAD_TYPE_NAME: Wording(
        *_INVALID,
        lambda p: (
            f"must be 1 to {p['max_length']} letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        ),
    ),
    Code.NOT_AN_INTEGER: Wording(*_INVALID, lambda p: f"must be an integer from {p['low']} to {p['high']}"),
    Code.DEPENDENCY_NOT_FOUND: Wording(*_INVALID, lambda p: f"job {p['job_id']} does not exist"),
    Code.BATCH_NOT_FOUND: Wording(404, "not-found", lambda p: f"batch {p['batch_id']} does not exist"),
    Code.BATCH_NOT_HELD: Wording(
        409,
        "not-lease-holder",
        lambda p: (
            f"only a worker holding a running job of batch {p['batch_id']}, with its lease_token, may add jobs"
        ),
    ),
    Code.BATCH_FINISHED: Wording(
        409, "invalid-state", lambda p: f"batch {p['batch_id']} is finished and takes no more jobs"
    ),
}


def problem_of(exc: QueueError) -> ApiError:
    """The problem response for a refusal of the queue layer (several at once: one 422 listing each)."""
    refusals = each_refusal(exc)
    if len(refusals) > 1:
        errors = [_field_error(refusal) for refusal in refusals]
        detail = "; ".join(f"{error['field']}: {error['message']}" for error in errors)
        return ApiError(422, "validation-failed", detail, errors=errors)
    wording = TABLE[exc.code]
    words = wording.words(exc.params)
    if exc.field is None:
        return ApiError(wording.status, wording.slug, words)
    if wording.slug != "validation-failed":  # a refusal about one item of a batch: name it first
        item = exc.field.partition(".")[0]
        where = f"{item}: " if item.startswith("jobs[") else ""
        return ApiError(wording.status, wording.slug, where + words)
    error = _field_error(exc)
    return ApiError(wording.status, wording.slug, f"{exc.field}: {words}", errors=[error])


def _field_error(exc: QueueError) -> dict[str, Any]:
    """One entry of a 422's ``errors``: the field and the English message (and the enabled type names)."""
    error: dict[str, Any] = {"field": exc.field, "message": TABLE[exc.code].words(exc.params)}
    if exc.code is Code.UNKNOWN_TYPE:
        error["allowed"] = exc.params["allowed"]
    return error
