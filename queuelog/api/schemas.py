"""Every request of the JSON API, declared once (README, "JSON API"); the answers are in ``answers.py``.

The views validate requests with these shapes (``Shape.parse``), and ``openapi.py`` serves them, with the
answers, as ``/openapi.json``. The checks a JSON Schema cannot
express live beside the field kinds in ``fields.py``, each told in its schema's ``description``.
"""

from __future__ import annotations

import base64
import binascii

from queuelog.api.fields import (
    boolean,
    choice,
    document,
    integer,
    number,
    payload_path,
    priority,
    text,
    timestamp,
)
from queuelog.api.problems import invalid
from queuelog.api.shapes import Configured, Field, ListOf, Shape
from queuelog.inputs import ascii_int
from queuelog.models import STATUSES
from queuelog.queue.running import MAX_PROGRESS_MESSAGE, MAX_SNOOZE_SECONDS, MIN_SNOOZE_SECONDS

MAX_BATCH_ENQUEUE = 500
MAX_BATCH_COMPLETE = 100
MAX_WAIT_SECONDS = 20
MAX_DELAY_SECONDS = 366 * 24 * 3600
MAX_RETRIES_LIMIT = 25
MAX_JOB_ID = 2**63 - 1
MAX_BATCH_KEY = 250  # leaves room for "#499" within the 255 characters of a key

# -- producers ----------------------------------------------------------------------------------------

JOB_BODY = Shape(
    "JobBody",
    "One job to enqueue: the body of POST /jobs, or an item of POST /jobs/batch.",
    {
        "type": text(64, "The job type: an enabled type of the allowlist (else 422, which names them)."),
        "payload": document(
            "The job's input. When its type has a JSON Schema the payload must match it (else 422 naming "
            "the path, e.g. payload.lines[1]).",
            default={},
        ),
        "priority": priority("Producers may use low and medium only (else 403).", default="low"),
        "max_retries": integer(
            0, MAX_RETRIES_LIMIT, "Failed attempts retried before the job fails.", default=3
        ),
        "idempotency_key": text(
            255,
            "The same owner, key and parameters answer 200 with the existing job; other parameters are 422 "
            "idempotency-key-reused. Must equal the Idempotency-Key header when both are sent.",
            nullable=True,
        ),
        "run_at": timestamp(
            "When the job becomes claimable (a time in the past counts as now). Not with delay_seconds."
        ),
        "delay_seconds": number(
            0,
            MAX_DELAY_SECONDS,
            "Seconds from now until the job becomes claimable. Not with run_at.",
            nullable=True,
        ),
    },
    required=("type",),
    exclusive=("run_at", "delay_seconds", "give run_at or delay_seconds, not both"),
)
BATCH_BODY = Shape(
    "BatchBody",
    "Up to 500 jobs, made all or nothing; a 422 names the index, e.g. jobs[3].type.",
    {
        "jobs": ListOf(
            JOB_BODY, 1, MAX_BATCH_ENQUEUE, f"must be a list of 1 to {MAX_BATCH_ENQUEUE} job bodies"
        )
    },
    required=("jobs",),
)
IDEMPOTENCY_KEY = text(
    255, "The idempotency key of the job (the body's idempotency_key, if sent, must equal it)."
)
BATCH_IDEMPOTENCY_KEY = text(MAX_BATCH_KEY, "One key for the whole batch: job i gets the key KEY#i.")
EMPTY_BODY = Shape("EmptyBody", "No fields: an empty body or {}.", {})


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, field: str = "cursor") -> int:
    try:
        value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = value.partition(":")
        job_id = ascii_int(number)
        if kind != "id" or job_id is None:
            raise ValueError
        return job_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid(field, "is not a cursor this API returned") from None


LIST_QUERY = Shape(
    "JobListQuery",
    "The query of GET /jobs: filters, page size and the cursor of the next page. status, type and priority"
    " choose the candidates through indexes; the other filters are checked on at most QUEUELOG_SEARCH_SCAN"
    " of them per page (README, The pages), and window_full in the answer says a page stopped there.",
    {
        "status": choice(STATUSES, "Only jobs in this state."),
        "type": text(64, "Only jobs of this type."),
        "priority": priority("Only jobs of this priority."),
        "worker": text(
            64, "Only jobs last held by this worker (its key's name). Checked on the window of candidates."
        ),
        "created_from": timestamp(
            "Only jobs created at or after this time. Checked on the window of candidates."
        ),
        "created_to": timestamp("Only jobs created before this time. Checked on the window of candidates."),
        "finished_from": timestamp(
            "Only jobs finished at or after this time. Checked on the window of candidates."
        ),
        "finished_to": timestamp("Only jobs finished before this time. Checked on the window of candidates."),
        "error": text(
            200,
            "Admins only: jobs whose latest (redacted) error contains this text, in any ASCII case, taken"
            " literally. Checked on the window of candidates.",
        ),
        "payload_path": payload_path(
            "With payload_value: the keys of a payload field, separated by dots (to, customer.email)."
        ),
        "payload_value": text(
            200,
            "With payload_path: the field's value written as text (a string as it is, 42, true). Checked"
            " on the window of candidates.",
        ),
        "limit": integer(1, 200, "Jobs per page; ASCII digits.", default=50),
        "cursor": Field(
            {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{6,28}$",
                "description": "The next_cursor of the previous page, as it was answered.",
            },
            "is not a cursor this API returned",
            check=decode_cursor,
        ),
    },
)

# -- workers ------------------------------------------------------------------------------------------

LEASE_TOKEN = text(64, "The lease_token of the claim that handed the job out.")
LEASE_SECONDS = integer(
    5,
    43200,
    "How long the lease lasts, in seconds (QUEUELOG_LEASE_SECONDS when absent).",
    nullable=True,
    default=Configured("LEASE_SECONDS"),
)
CLAIM_BODY = Shape(
    "ClaimBody",
    "What to claim, and how long to wait for it.",
    {
        "types": ListOf(
            text(64, "A job type."),
            1,
            100,
            "must be a list of 1 to 100 job type names",
            nullable=True,
            description="Claim only jobs of these types (any type when absent).",
        ),
        "lease_seconds": LEASE_SECONDS,
        "limit": integer(
            1, 100, "Claim up to this many jobs: the answer is then {jobs: [...]}, never 204.", nullable=True
        ),
        "wait_seconds": number(
            0, MAX_WAIT_SECONDS, "Long poll: wait this long at most for a job.", default=0
        ),
    },
)
HEARTBEAT_BODY = Shape(
    "HeartbeatBody",
    "Extend the lease; report the attempt's progress too, if you like (docs/running-jobs.md).",
    {
        "lease_token": LEASE_TOKEN,
        "lease_seconds": LEASE_SECONDS,
        "progress": integer(
            0, 100, "How far the attempt is, in percent (shown on the job's page).", nullable=True
        ),
        "progress_message": text(
            MAX_PROGRESS_MESSAGE, "A short note on what the attempt is doing.", nullable=True
        ),
    },
    required=("lease_token",),
)
RESULT = document("The job's result.", nullable=True)
COMPLETE_BODY = Shape(
    "CompleteBody",
    "Report success.",
    {"lease_token": LEASE_TOKEN, "result": RESULT},
    required=("lease_token",),
)
ERROR_MESSAGE = "is required and must be a string"
FAIL_BODY = Shape(
    "FailBody",
    "Report a failed attempt.",
    {
        "lease_token": LEASE_TOKEN,
        "error": Field(
            {
                "type": "string",
                "description": "What went wrong: stored redacted and cut to 4,096 characters; shown to "
                "admins only.",
            },
            ERROR_MESSAGE,
            missing=ERROR_MESSAGE,
        ),
        "retryable": boolean("False fails the job for good, whatever retries remain.", default=True),
    },
    required=("lease_token", "error"),
)
ID_MESSAGE = f"must be an integer from 1 to {MAX_JOB_ID}"
COMPLETE_ITEM = Shape(
    "CompleteItem",
    "One job of a batch completion.",
    {
        "id": integer(1, MAX_JOB_ID, "The job's id.", missing=ID_MESSAGE),
        "lease_token": LEASE_TOKEN,
        "result": RESULT,
    },
    required=("id", "lease_token"),
    message="must be an object with id, lease_token and an optional result",
)
BATCH_COMPLETE_BODY = Shape(
    "BatchCompleteBody",
    "Up to 100 held jobs to complete; each job may appear once (else 422 on jobs).",
    {
        "jobs": ListOf(
            COMPLETE_ITEM, 1, MAX_BATCH_COMPLETE, f"must be a list of 1 to {MAX_BATCH_COMPLETE} items"
        )
    },
    required=("jobs",),
)

# -- running jobs (docs/running-jobs.md) --------------------------------------------------------------

SNOOZE_BODY = Shape(
    "SnoozeBody",
    "Hand the held job back to run later, without counting a failure.",
    {
        "lease_token": LEASE_TOKEN,
        "delay_seconds": number(
            MIN_SNOOZE_SECONDS,
            MAX_SNOOZE_SECONDS,
            "When the job becomes claimable again, in seconds from now.",
            missing=f"is required and must be a number from {MIN_SNOOZE_SECONDS} to {MAX_SNOOZE_SECONDS}",
        ),
    },
    required=("lease_token", "delay_seconds"),
)
CANCELLED_BODY = Shape(
    "CancelledBody",
    "Report that the held job stopped because its cancellation was requested.",
    {"lease_token": LEASE_TOKEN},
    required=("lease_token",),
)

REQUESTS = (
    SNOOZE_BODY,
    CANCELLED_BODY,
    JOB_BODY,
    BATCH_BODY,
    EMPTY_BODY,
    LIST_QUERY,
    CLAIM_BODY,
    HEARTBEAT_BODY,
    COMPLETE_BODY,
    FAIL_BODY,
    BATCH_COMPLETE_BODY,
    IDEMPOTENCY_KEY,
    BATCH_IDEMPOTENCY_KEY,
)
