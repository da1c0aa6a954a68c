"""Flow control of job types (docs/flow-control.md): the limits admins set, checked here once for every face.

A **concurrency limit** caps the jobs of a type running at once, across every worker and server. A **rate
limit** caps claims: a token bucket of ``rate_limit`` tokens, refilled continuously at ``rate_limit /
rate_period`` tokens per second. NULL is no limit. The claim enforces them (queuelog/engines/); this module
checks what an admin gives, works out the columns to write (a rate limit's period defaults to 60 seconds;
a changed rate limit starts again with a full bucket) and says how many jobs of each type run now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from queuelog.engines.records import counts_by_type
from queuelog.queue.errors import Code, InvalidValues, JobValidationError

if TYPE_CHECKING:
    from queuelog.engines import Engine
    from queuelog.models import JobType

MAX_CONCURRENCY = 10_000
MAX_RATE = 1_000_000
MAX_PERIOD = 86_400  # a day, in seconds
DEFAULT_PERIOD = 60  # a rate limit given without its period counts per minute
RANGES: dict[str, tuple[int, int]] = {
    "concurrency_limit": (1, MAX_CONCURRENCY),
    "rate_limit": (1, MAX_RATE),
    "rate_period": (1, MAX_PERIOD),
}
LIMIT_FIELDS = tuple(RANGES)
# The bucket's state, written by the claim: NULL tokens are a full bucket.
BUCKET_FIELDS = ("rate_tokens", "rate_checked_at")


def limit_refusal(field: str, value: Any) -> JobValidationError | None:
    """Why ``value`` cannot be the limit ``field`` (None removes a limit), or None when it can. Only a
    real integer will do: not ``true``, not 1.5, not "2"."""
    if value is None:
        return None
    low, high = RANGES[field]
    if type(value) is not int:
        return JobValidationError(Code.NOT_AN_INTEGER, field=field, low=low, high=high)
    if not low <= value <= high:
        return JobValidationError(Code.OUT_OF_RANGE, field=field, low=low, high=high)
    return None


def limit_changes(current: JobType, given: Mapping[str, Any]) -> dict[str, Any]:
    """The columns to write for the limits in ``given`` (any of ``LIMIT_FIELDS``; None removes one), the
    others staying as they are. Raises ``InvalidValues`` with one refusal per bad field.

    A rate limit given without a period keeps the type's period, or takes ``DEFAULT_PERIOD``; a period
    without a rate limit is not stored (there is nothing for it to apply to). When the rate limit or its
    period changes, or is removed, the bucket's state is cleared: the new rate starts with a full bucket.
    """
    refusals = [r for f in LIMIT_FIELDS if f in given and (r := limit_refusal(f, given[f])) is not None]
    if refusals:
        raise InvalidValues(refusals)
    changes: dict[str, Any] = {}
    if "concurrency_limit" in given:
        changes["concurrency_limit"] = given["concurrency_limit"]
    if "rate_limit" in given or "rate_period" in given:
        rate = given["rate_limit"] if "rate_limit" in given else current.rate_limit
        if rate is None:
            period = None
        elif "rate_period" in given:
            period = given["rate_period"] or DEFAULT_PERIOD  # null: back to the default
        else:
            period = current.rate_period or DEFAULT_PERIOD
        changes["rate_limit"], changes["rate_period"] = rate, period
        if (rate, period) != (current.rate_limit, current.rate_period):
            changes.update(dict.fromkeys(BUCKET_FIELDS))
    return changes


def running_by_type(engine: Engine) -> dict[str, int]:
    """How many jobs of each type are running now, from the queue's counts by status and type."""
    return running_of(counts_by_type(engine.counts()))


def running_of(by_type: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The running jobs of each type that has any, from counts as ``counts_by_type`` gives them."""
    return {name: statuses["running"] for name, statuses in by_type.items() if statuses["running"]}


def is_limited(job_type: JobType) -> bool:
    return job_type.concurrency_limit is not None or job_type.rate_limit is not None


PERIOD_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def period_text(seconds: int) -> str:
    """A period as the command line writes it: ``m`` for a minute, ``30s``, ``5m``, ``h``, ``2d``."""
    for unit, size in PERIOD_UNITS:
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count}{unit}"
    return f"{seconds}s"  # unreachable: every whole number of seconds is a count of seconds


def rate_text(job_type: JobType) -> str:
    """``100/m``, ``10/30s``, or ``-`` without a rate limit (the form ``types limit --rate`` takes)."""
    if job_type.rate_limit is None:
        return "-"
    return f"{job_type.rate_limit}/{period_text(job_type.rate_period or DEFAULT_PERIOD)}"


def change_summary(before: JobType, changes: Mapping[str, Any]) -> str:
    """The audit log's detail of a change: each field that changed, ``field: old -> new``, in English."""
    parts = []
    for key, value in changes.items():
        if key in BUCKET_FIELDS or key == "updated_at":
            continue
        old = getattr(before, key)
        if old == value:
            continue
        if key == "payload_schema":
            parts.append("payload_schema changed")
        elif key == "description":
            parts.append("description changed")
        else:
            parts.append(f"{key}: {_shown(old)} -> {_shown(value)}")
    return "; ".join(parts) or "nothing changed"


def _shown(value: Any) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
