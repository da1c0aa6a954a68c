"""What the queue layer refuses: a code and its parameters (the pattern of ``queuelog.access.refusals``).

The exceptions carry no HTTP status, no problem type and no words: the JSON API maps each code to a
status, a problem type and an English detail (``queuelog.api.refusals``), the pages to a translated message
beside the right field (``queuelog.web.refusals``). The classes group the codes for callers that catch a
kind of refusal; the code says which one it is.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from queuelog.access.refusals import Refused


class Code(StrEnum):
    """Why the queue layer refused. The parameters each code carries are listed beside it."""

    JOB_NOT_FOUND = "job_not_found"  # job_id
    NOT_CANCELLABLE = "not_cancellable"  # job_id, status: only pending or running jobs can be cancelled
    NOT_RETRYABLE = "not_retryable"  # job_id, status: only failed or cancelled jobs can be retried
    NOT_LEASE_HOLDER = "not_lease_holder"  # job_id: wrong worker, stale or wrong token, whatever the state
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"  # job_id: the job the key names
    PRIORITY_NOT_ALLOWED = "priority_not_allowed"  # ceiling: the highest priority the caller may use
    UNKNOWN_TYPE = "unknown_type"  # type, allowed: the enabled names, sorted
    SCHEMA_UNUSABLE = "schema_unusable"  # type (the name): its saved schema cannot be applied
    SCHEMA_MISMATCH = "schema_mismatch"  # reason: the JSON Schema library's own (English) words
    NOT_AN_OBJECT = "not_an_object"  # a payload or result that is not a JSON object
    TOO_DEEP = "too_deep"  # limit: levels
    TOO_LARGE = "too_large"  # size, limit: bytes serialized
    NUL_CHARACTER = "nul_character"  # text holding U+0000, which PostgreSQL cannot store
    LONE_SURROGATE = "lone_surrogate"  # text that UTF-8 cannot encode
    NOT_FINITE = "not_finite"  # NaN or Infinity in a payload or result
    NUMBER_UNDERFLOW = "number_underflow"  # a number written non-zero that a double holds only as 0 (1e-400)
    NOT_PRINTABLE = "not_printable"  # max_length: a name or key of printable characters only
    TIME_OUT_OF_RANGE = "time_out_of_range"  # low, high: years
    # Running jobs (queue/running.py; docs/running-jobs.md). The holder's refusals: another worker, or a
    # stale token, gets NOT_LEASE_HOLDER whatever the job's state.
    SNOOZE_LIMIT = "snooze_limit"  # job_id, limit: the job was snoozed that many times already
    CANCEL_NOT_REQUESTED = "cancel_not_requested"  # job_id: a stop reported, but nobody asked for it
    OUT_OF_RANGE = "out_of_range"  # low, high: a number (a progress, a snooze's delay) outside them
    TOO_LONG = "too_long"  # limit: characters (a progress message)
    # Schedules (queuelog/queue/schedules.py, docs/schedules.md)
    SCHEDULE_NOT_FOUND = "schedule_not_found"  # name
    SCHEDULE_CHANGING = "schedule_changing"  # name: edited concurrently again and again; try again
    SCHEDULE_EXISTS = "schedule_exists"  # name: the name is taken
    BAD_SCHEDULE_NAME = "bad_schedule_name"  # max_length: letters, digits, '_', '.', '-'
    TIMING_NEEDED = "timing_needed"  # exactly one of cron and interval_seconds must be given
    CRON_FIELDS = "cron_fields"  # not five fields, nor an alias (@hourly ...)
    CRON_INVALID = "cron_invalid"  # reason: cronsim's own (English) words
    CRON_NEVER = "cron_never"  # a valid expression that matches no date (0 0 30 2 *)
    INTERVAL_OUT_OF_RANGE = "interval_out_of_range"  # max: seconds (the least is 1)
    UNKNOWN_TIMEZONE = "unknown_timezone"  # timezone: not an IANA zone name
    BAD_MISSED_POLICY = "bad_missed_policy"  # allowed: the policies
    # Job types and their flow control (queuelog/queue/limits.py, docs/flow-control.md)
    TYPE_NOT_FOUND = "type_not_found"  # name
    TYPE_EXISTS = "type_exists"  # name: the name is taken
    BAD_TYPE_NAME = "bad_type_name"  # max_length: letters, digits, '_', '.', ':', '-'
    NOT_AN_INTEGER = "not_an_integer"  # low, high: a whole number is needed (not true, 1.5 or "2")
    # Workflows (queuelog/queue/workflows.py, docs/workflows.md)
    DEPENDENCY_NOT_FOUND = "dependency_not_found"  # job_id: no such job, or one the caller may not see
    BATCH_NOT_FOUND = "batch_not_found"  # batch_id: no such batch, or one the caller may not see
    BATCH_NOT_HELD = "batch_not_held"  # batch_id: the worker holds no running member under that token
    BATCH_FINISHED = "batch_finished"  # batch_id: a finished batch takes no more jobs


# The codes only schedules give: the command line words them itself (queuelog/cli/schedules.py).
SCHEDULE_CODES = frozenset(
    {
        Code.SCHEDULE_NOT_FOUND,
        Code.SCHEDULE_CHANGING,
        Code.SCHEDULE_EXISTS,
        Code.BAD_SCHEDULE_NAME,
        Code.TIMING_NEEDED,
        Code.CRON_FIELDS,
        Code.CRON_INVALID,
        Code.CRON_NEVER,
        Code.INTERVAL_OUT_OF_RANGE,
        Code.UNKNOWN_TIMEZONE,
        Code.BAD_MISSED_POLICY,
    }
)


class QueueError(Refused):
    """Base class of the queue layer's refusals; ``code`` is a ``Code``."""

    code: Code

    def __init__(self, code: Code, *, field: str | None = None, **params: Any) -> None:
        super().__init__(code, field=field, **params)


class JobNotFound(QueueError):
    """No such job, or none the caller may see (``Code.JOB_NOT_FOUND``); no such batch
    (``BATCH_NOT_FOUND``)."""


class InvalidState(QueueError):
    """The job exists but its state does not allow the transition (``NOT_CANCELLABLE``, ``NOT_RETRYABLE``,
    ``SNOOZE_LIMIT``, ``CANCEL_NOT_REQUESTED``); a finished batch takes no jobs (``BATCH_FINISHED``)."""


class NotLeaseHolder(QueueError):
    """The caller does not hold the job's current lease (``NOT_LEASE_HOLDER``), or a running member of
    the batch (``BATCH_NOT_HELD``)."""


class IdempotencyKeyReused(QueueError):
    """The owner used this idempotency key before with other parameters (``IDEMPOTENCY_KEY_REUSED``)."""


class JobTypeNotFound(QueueError, LookupError):
    """No job type of that name (``Code.TYPE_NOT_FOUND``); a ``LookupError`` too, as before codes."""

    def __init__(self, name: str) -> None:
        super().__init__(Code.TYPE_NOT_FOUND, name=name)


class JobValidationError(QueueError):
    """Input the queue layer itself refuses (a type, a payload, a key, a time); ``field`` names it."""


class InvalidValues(JobValidationError):
    """Several inputs refused at once (a schedule's settings), so that each face can show every one beside
    its field. ``refusals`` lists them in order; the exception's own code, field and params are the first's."""

    def __init__(self, refusals: list[JobValidationError]) -> None:
        first = refusals[0]
        super().__init__(first.code, field=first.field, **first.params)
        self.refusals = refusals


def refuse_each(refusals: list[JobValidationError]) -> None:
    """Raise ``refusals``, if any: the one alone, or several at once as ``InvalidValues``."""
    if len(refusals) > 1:
        raise InvalidValues(refusals)
    if refusals:
        raise refusals[0]


def each_refusal(exc: QueueError) -> list[QueueError]:
    """The refusals an exception stands for: those of ``InvalidValues``, else the exception itself."""
    return list(exc.refusals) if isinstance(exc, InvalidValues) else [exc]


class NotAllowed(QueueError):
    """The caller may not ask for this (``PRIORITY_NOT_ALLOWED``)."""
