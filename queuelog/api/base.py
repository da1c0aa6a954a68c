"""The JSON API's blueprint and what its views share: errors, who is calling, and how a job is shown.

The views are thin adapters (docs/api.md): each is declared once as an operation (``registry.py``,
which checks the caller and parses the request) and calls the queue layer. ``jobs.py`` has the producers'
and admins' operations on jobs, ``workers.py`` the workers', ``schedules.py`` and ``types.py`` the admins'
schedules and job types, ``operations.py`` the rest.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import NotFound, RequestEntityTooLarge

from queuelog.api.answers import JOB
from queuelog.api.problems import ApiError
from queuelog.api.refusals import problem_of
from queuelog.api.render import dumps, json_text_response, render_json
from queuelog.inputs import text_fault
from queuelog.queue import Code, JobNotFound, JobRecord, Queue, QueueError
from queuelog.queue.principal import Principal

bp = Blueprint("api", __name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the Prometheus text format


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError):
    return exc.response()


@bp.errorhandler(QueueError)
def _queue_error(exc: QueueError):
    return problem_of(exc).response()


@bp.before_request
def _refuse_early() -> None:
    """Before any key is looked at: a declared body past the limit is 413 on every route (Werkzeug would
    say so only when a view reads it), and a path segment holding text no database can store (NUL, which
    PostgreSQL refuses) names nothing that exists: 404, on both engines."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    length = request.content_length
    if limit is not None and length is not None and length > limit:
        raise RequestEntityTooLarge()
    for value in (request.view_args or {}).values():
        if isinstance(value, str) and text_fault(value) is not None:
            raise NotFound()


def queue() -> Queue:
    return current_app.extensions["queuelog"]["queue"]


# -- who is calling -----------------------------------------------------------------------------------


def caller() -> Principal:
    """The caller behind ``Authorization: Bearer``; the API never looks at cookies."""
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(
            401,
            "unauthorized",
            "send an API key as 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": 'Bearer realm="queuelog"'},
        )
    principal = current_app.extensions["queuelog"]["admin"].authenticate(key.strip())
    if principal is None:
        raise ApiError(
            401,
            "unauthorized",
            "the API key is unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer realm="queuelog", error="invalid_token"'},
        )
    return principal


# -- rendering ----------------------------------------------------------------------------------------


def job_json(job: JobRecord, principal: Principal) -> str:
    """A job as the caller may see it (the principal says), as JSON text: idempotency keys for owners and
    admins, error text for admins. The fields and their order are those JOB declares (answers.py)."""
    if principal.sees_errors:
        omit = _HIDDEN_FROM_ADMINS
    elif principal.sees_idempotency_key(job):
        omit = _HIDDEN_FROM_OWNERS
    else:
        omit = _HIDDEN_FROM_OTHERS
    return render_json(JOB, job, omit)


_HIDDEN_FROM_ADMINS = frozenset({"lease_token"})  # a claim's answer adds the token itself
_HIDDEN_FROM_OWNERS = frozenset({"lease_token", "error"})
_HIDDEN_FROM_OTHERS = frozenset({"lease_token", "error", "idempotency_key"})


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``body`` (a value) as a JSON answer; ``render.json_text_response`` takes text already written."""
    return json_text_response(dumps(body), status, headers)


MINIMAL = {"Preference-Applied": "return=minimal"}


def wants_minimal() -> bool:
    """Whether the request says ``Prefer: return=minimal`` (RFC 7240): preferences are separated by commas,
    in one header or several, names and these values in any case, and the first ``return`` counts."""
    # Straight from the WSGI environ: the server joins repeated headers into one value, with commas, and
    # the headers' getlist would walk the whole environ to find it (this runs on every worker request).
    header = request.environ.get("HTTP_PREFER")
    if not header:
        return False
    for preference in header.split(","):
        name, _, value = preference.partition(";")[0].partition("=")
        if name.strip().lower() == "return":
            return value.strip().strip('"').lower() == "minimal"
    return False


def visible_job(job: JobRecord | None, principal: Principal, job_id: int) -> JobRecord:
    """The job if the caller may see it; 404 otherwise, so that others' jobs don't reveal themselves."""
    if job is None or not principal.may_see(job):
        raise JobNotFound(Code.JOB_NOT_FOUND, job_id=job_id)
    return job
