"""The paths of ``/openapi.json`` for a worker's reports on a running job (queuelog/api/running.py;
docs/running-jobs.md), beside those of openapi.py. Progress rides on the heartbeat, cancel requests on
POST /jobs/{id}/cancel: both are in openapi.py."""

from __future__ import annotations

from typing import Any

from queuelog.api import answers, schemas
from queuelog.api.openapi import APPLIED, JOB_ID, NOT_FOUND, PREFER, _either, _json, _op, _problem
from queuelog.api.shapes import Configured


def running_paths() -> dict[str, Any]:
    """POST /jobs/{id}/snooze and POST /jobs/{id}/cancelled (the lease holder)."""
    return {
        "/jobs/{job_id}/snooze": {
            "post": _op(
                "Hand a held job back to run later, not counted as a failure (the lease holder)",
                {
                    "200": _json(
                        "The job, pending (or cancelled, when that was requested); with Prefer: "
                        "return=minimal, where it stands",
                        _either(answers.JOB, answers.JOB_STATE),
                        APPLIED,
                    ),
                    "404": NOT_FOUND,
                    "409": _problem(
                        Configured(
                            text="Not the lease holder; or invalid-state: snoozed {MAX_SNOOZES} times already"
                        )
                    ),
                },
                schemas.SNOOZE_BODY,
                [JOB_ID, PREFER],
            ),
        },
        "/jobs/{job_id}/cancelled": {
            "post": _op(
                "Report that a held job stopped because its cancellation was requested (the lease holder)",
                {
                    "200": _json(
                        "The job, cancelled; with Prefer: return=minimal, where it stands",
                        _either(answers.JOB, answers.JOB_STATE),
                        APPLIED,
                    ),
                    "404": NOT_FOUND,
                    "409": _problem("Not the lease holder; or invalid-state: no cancellation was requested"),
                },
                schemas.CANCELLED_BODY,
                [JOB_ID, PREFER],
            ),
        },
    }
