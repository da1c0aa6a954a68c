"""Refusals (``queuelog.access.refusals``: a code and its parameters) worded for the pages, in the page's language.

The domain raises ``AuthError`` (users, passwords, keys), ``QueueError`` (jobs) or ``SchemaRefused`` (job
types' schemas) with a code; the pages
show the translation for that code beside the field it blames, never an exception's English text.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from flask_babel import LazyString, format_decimal
from flask_babel import lazy_gettext as _l

from queuelog.access.refusals import PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, Refusal, Refused
from queuelog.queue.errors import Code
from queuelog.queue.types import SchemaFault

_ABOUT_PEOPLE: dict[Refusal, LazyString] = {
    Refusal.BAD_ROLE: _l("Choose a role: admin or producer."),
    Refusal.BAD_USERNAME: _l("Use 1 to 64 printable characters, without spaces at either end."),
    Refusal.USER_EXISTS: _l("A user named %(name)s exists."),
    Refusal.NO_SUCH_USER: _l("There is no user named %(name)s."),
    Refusal.LAST_ADMIN: _l("There must be at least one active admin."),
    Refusal.PASSWORD_TOO_SHORT: _l("A password needs at least %(min)d characters."),
    Refusal.PASSWORD_TOO_LONG: _l("Use at most %(max)d characters."),
    Refusal.PASSWORD_BLANK: _l("A password cannot be only spaces."),
    Refusal.BAD_KIND: _l("Choose a kind: worker or producer."),
    Refusal.BAD_KEY_NAME: _l("Use 1 to 64 printable characters."),
    Refusal.KEY_EXISTS: _l("A key named %(name)s is in use. Revoke it first, or choose another name."),
    Refusal.NO_SUCH_KEY: _l("There is no key named %(name)s."),
    Refusal.PRODUCER_KEY_NEEDS_USER: _l("A producer key acts for a user: choose one."),
    Refusal.WORKER_KEY_HAS_USER: _l("A worker key acts for no user: leave the user empty."),
}
_CRON = _l(
    "Not a cron expression: give five fields (minute hour day month weekday) or @hourly, @daily, @weekly, @monthly or @yearly."
)
_ABOUT_JOBS: dict[Code, LazyString] = {
    Code.JOB_NOT_FOUND: _l("Job %(job_id)s does not exist."),
    Code.NOT_CANCELLABLE: _l("Only pending or running jobs can be cancelled."),
    Code.NOT_RETRYABLE: _l("Only failed or cancelled jobs can be retried."),
    Code.NOT_LEASE_HOLDER: _l("Only the worker holding job %(job_id)s may report on it."),
    Code.IDEMPOTENCY_KEY_REUSED: _l("This idempotency key was already used with other parameters."),
    Code.PRIORITY_NOT_ALLOWED: _l("Producers may use the priorities low and medium only."),
    Code.UNKNOWN_TYPE: _l("The job type %(type)s is unknown or disabled. Enabled types: %(allowed)s."),
    Code.SCHEMA_UNUSABLE: _l("The payload schema of %(type)s cannot be applied; an admin must fix it."),
    Code.SCHEMA_MISMATCH: _l("%(path)s does not match the job type's schema: %(message)s"),
    Code.NOT_AN_OBJECT: _l("The payload must be a JSON object."),
    Code.TOO_DEEP: _l("The payload is nested more than %(limit)s levels deep."),
    Code.TOO_LARGE: _l("The payload is %(size)s bytes serialized; the limit is %(limit)s bytes."),
    Code.NUL_CHARACTER: _l("The payload contains the NUL character (\\u0000), which cannot be stored."),
    Code.LONE_SURROGATE: _l("The payload contains text that is not valid Unicode (a lone surrogate)."),
    Code.NOT_FINITE: _l("Numbers in the payload must be finite (no NaN or Infinity)."),
    Code.NUMBER_UNDERFLOW: _l(
        "%(path)s is a number too close to 0 to be kept (such as 1e-400); write 0 if 0 is meant."
    ),
    Code.NOT_PRINTABLE: _l("Use printable characters only, no line breaks or other control characters."),
    Code.TIME_OUT_OF_RANGE: _l("Choose a start time between the years %(low)d and %(high)d."),
    Code.SNOOZE_LIMIT: _l("Job %(job_id)s was snoozed %(limit)s times already, the limit."),
    Code.CANCEL_NOT_REQUESTED: _l("Nobody asked to cancel job %(job_id)s."),
    Code.OUT_OF_RANGE: _l("Choose a number from %(low)s to %(high)s."),
    Code.TOO_LONG: _l("Use at most %(limit)s characters."),
    Code.SCHEDULE_NOT_FOUND: _l("There is no schedule named %(name)s."),
    Code.SCHEDULE_CHANGING: _l("The schedule %(name)s kept changing; try again."),
    Code.SCHEDULE_EXISTS: _l("A schedule with this name exists."),
    Code.BAD_SCHEDULE_NAME: _l(
        "Use 1 to 55 letters, digits, '_', '.' or '-', starting with a letter or digit."
    ),
    Code.TIMING_NEEDED: _l("Give a cron expression or an interval, one of them."),
    Code.CRON_FIELDS: _CRON,
    Code.CRON_INVALID: _CRON,
    Code.CRON_NEVER: _l("This cron expression never matches a date."),
    Code.INTERVAL_OUT_OF_RANGE: _l("Enter a whole number of seconds from 1 to %(max)d."),
    Code.UNKNOWN_TIMEZONE: _l("Choose a time zone from the list."),
    Code.BAD_MISSED_POLICY: _l("Choose one of the listed options."),
    Code.TYPE_NOT_FOUND: _l("There is no job type named %(name)s."),
    Code.TYPE_EXISTS: _l("A job type with this name exists."),
    Code.BAD_TYPE_NAME: _l("Use letters, digits, '_', '.', ':' or '-', starting with a letter or digit."),
    Code.NOT_AN_INTEGER: _l("Enter a whole number from %(low)s to %(high)s."),
    Code.DEPENDENCY_NOT_FOUND: _l("There is no job %(job_id)s to wait for."),
    Code.BATCH_NOT_FOUND: _l("Batch %(batch_id)s does not exist."),
    Code.BATCH_NOT_HELD: _l("Only a worker running a job of batch %(batch_id)s may add jobs to it."),
    Code.BATCH_FINISHED: _l("Batch %(batch_id)s is finished and takes no more jobs."),
}
_ABOUT_SCHEMAS: dict[SchemaFault, LazyString] = {
    SchemaFault.NOT_OBJECT: _l("The schema must be a JSON object."),
    SchemaFault.BAD_TEXT: _l(
        "The schema contains characters that cannot be stored (such as the NUL character)."
    ),
    SchemaFault.NOT_FINITE: _l("Numbers in the schema must be finite (no NaN or Infinity)."),
    SchemaFault.TOO_DEEP: _l("The schema is nested more than %(depth)d levels deep."),
    SchemaFault.REMOTE_REF: _l(
        "The schema refers to another document; only references within the schema (starting with #) are allowed, and nothing is fetched."
    ),
    SchemaFault.UNRESOLVABLE_REF: _l("A reference in the schema points at nothing in it."),
    SchemaFault.INVALID: _l("Not a valid JSON Schema: %(reason)s"),
    SchemaFault.TOO_LARGE: _l("The schema is %(size)s bytes long; at most %(limit)s are allowed."),
    SchemaFault.BAD_PATTERN: _l(
        "The pattern %(pattern)s cannot be used: patterns are matched in time linear in the text, which rules out lookaround and backreferences."
    ),
    SchemaFault.TOO_COSTLY: _l(
        "The schema would check one value of a payload against more than %(limit)s subschemas (through $ref, allOf, anyOf, oneOf, not, if/then/else), or refers back to itself without going deeper into the payload."
    ),
}
MESSAGES: dict[type[StrEnum], dict[Any, LazyString]] = {
    Refusal: _ABOUT_PEOPLE,
    Code: _ABOUT_JOBS,
    SchemaFault: _ABOUT_SCHEMAS,
}
_NUMBERS_AS_TEXT = frozenset({Code.OUT_OF_RANGE, Code.NOT_AN_INTEGER})  # their bounds shown as 10,000
_LIMITS = {"min": PASSWORD_MIN_LENGTH, "max": PASSWORD_MAX_LENGTH}


def refusal_text(exc: Refused) -> str:
    """The refusal in the page's language."""
    message = MESSAGES.get(type(exc.code), {}).get(exc.code)
    if message is None:  # a code without a page wording yet: say something true rather than English
        return str(_l("That could not be done."))
    return str(message) % _values(exc)


def _values(exc: Refused) -> dict[str, Any]:
    """The refusal's parameters as the messages use them: numbers in the page's locale, lists joined."""
    values: dict[str, Any] = {**_LIMITS, **exc.params, "path": exc.field or ""}
    if exc.code is SchemaFault.TOO_DEEP:
        values["depth"] = values["limit"]
    if "reason" in values:
        values["message"] = values["reason"]  # the JSON Schema library's own (English) words
    if "allowed" in values:
        values["allowed"] = ", ".join(values["allowed"]) or "—"
    numbers = ("size", "limit", "low", "high") if exc.code in _NUMBERS_AS_TEXT else ("size", "limit")
    for name in numbers:
        if isinstance(values.get(name), int):
            values[name] = format_decimal(values[name])
    return values


def show_beside_fields(form: Any, refusals: Iterable[Refused], fallback: Any) -> None:
    """Each refusal in the page's language, beside the form field it names (``fallback`` when it names
    none of the form's)."""
    for refusal in refusals:
        name = form_field(refusal)
        field = form[name] if name is not None and name in form else fallback
        field.errors.append(refusal_text(refusal))


def form_field(exc: Refused) -> str | None:
    """The name of the form field a refusal blames (``payload`` for ``payload.lines[1]``), or None."""
    if exc.field is None:
        return None
    return exc.field.split(".")[0].split("[")[0]


# Which form field a refusal about people belongs beside (their refusals name no field of their own).
PASSWORD_REFUSALS = frozenset({Refusal.PASSWORD_TOO_SHORT, Refusal.PASSWORD_TOO_LONG, Refusal.PASSWORD_BLANK})
KEY_USER_REFUSALS = frozenset(
    {Refusal.PRODUCER_KEY_NEEDS_USER, Refusal.WORKER_KEY_HAS_USER, Refusal.NO_SUCH_USER}
)
