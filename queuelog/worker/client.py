"""The worker's side of the JSON API: claims, reports and heartbeats, over the shared transport
(``queuelog.wire.transport``, standard library only, so workers stay light).

The server reports every error as an RFC 9457 problem document (``type``, ``title``, ``status``,
``detail``); :func:`describe` turns one into a single line, and the exceptions below carry it.
"""

from __future__ import annotations

import time
from typing import Any

from queuelog.wire.transport import Answer, NoAnswer, Transport, describe

__all__ = ["LeaseLost", "QueueClient", "RequestRefused", "TransientError", "describe", "retry_delay"]


class TransientError(Exception):
    """The server could not be reached or could not answer now (connection error, timeout, 5xx, 429):
    the same request may well succeed later; ``retry_after`` is the server's Retry-After in seconds, if
    it said (a 503 while its database is out, docs/operations.md#outages)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def retry_delay(failures: int, exc: TransientError, cap: float) -> float:
    """The pause before trying again after ``failures`` transient errors in a row (``exc`` the last):
    doubling from half a second up to ``cap``, and at least the server's Retry-After, within ``cap``."""
    delay = min(cap, 0.25 * 2**failures)
    if exc.retry_after is not None:
        delay = max(delay, min(exc.retry_after, cap))
    return delay


class RequestRefused(Exception):
    """The server answered with a 4xx: the request itself is wrong, and repeating it will not help.

    ``status`` is the HTTP status, ``body`` the decoded answer (a problem document as a dict, or text),
    ``problem_type`` the problem's ``type`` (e.g. "/problems/not-lease-holder") when there is one.
    """

    def __init__(self, status: int, body: Any):
        super().__init__(describe(status, body))
        self.status = status
        self.body = body
        self.problem_type: str | None = body.get("type") if isinstance(body, dict) else None


class LeaseLost(RequestRefused):
    """A report or heartbeat for a held job was refused with 404 or 409: the job is no longer this
    worker's (its lease expired and it was handed out again, or it is gone)."""


# The compact answers (docs/api.md#compact-answers-for-workers): a claim gives what a handler needs, a report only the job's
# state; the other endpoints ignore the preference.
COMPACT = {"Prefer": "return=minimal"}


class QueueClient:
    """Talks to one queuelog server with one worker key. One keep-alive connection per thread."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0):
        self.transport = Transport(url, key, timeout=timeout)
        self.url = self.transport.url  # the server's address as it may be logged
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
        repeatable: bool = True,
    ) -> Any:
        """Send one request; returns the decoded JSON answer (None when empty). ``repeatable=False`` for a
        request that must reach the server at most once (the transport then never sends it again).

        Raises TransientError (no answer, 5xx, 429) or RequestRefused (any other 4xx).
        """
        return self._send(method, path, body, timeout=timeout, repeatable=repeatable).body

    def _send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
        repeatable: bool = True,
    ) -> Answer:
        """``request``, answering the whole answer (its status and headers too)."""
        try:
            answer = self.transport.send(
                method, path, body, timeout=timeout, headers=COMPACT, repeatable=repeatable
            )
        except NoAnswer as exc:
            raise TransientError(str(exc)) from exc
        if answer.status >= 500 or answer.status == 429:
            raise TransientError(
                f"{method} {path}: {describe(answer.status, answer.body)}", answer.retry_after
            )
        if answer.status >= 400:
            raise RequestRefused(answer.status, answer.body)
        return answer

    def _held_job_request(
        self, path: str, body: dict[str, Any], then: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A report or heartbeat for a held job: 404 and 409 mean the job is no longer ours, but for a 409
        invalid-state (a snooze over the limit, a cancellation nobody asked for), which stays a
        RequestRefused. A report that claims next may wait for it on the server (``then``'s wait)."""
        timeout = None if then is None else then.get("wait_seconds", 0) + self.timeout
        try:
            return self.request("POST", path, body, timeout=timeout)
        except RequestRefused as exc:
            if exc.status in (404, 409) and exc.problem_type != "/problems/invalid-state":
                raise LeaseLost(exc.status, exc.body) from None
            raise

    # -- the worker endpoints -----------------------------------------------------------------------

    def claim(
        self,
        *,
        limit: int,
        wait_seconds: float,
        types: list[str] | None = None,
        lease_seconds: int | None = None,
        request_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Claim up to ``limit`` jobs, waiting up to ``wait_seconds`` on the server when there are none; each
        as a compact WorkerJob (id, type, payload, priority, retry_count, max_retries, lease_expires_at,
        snooze_count, batch_id, lease_token). A claim sent again with the same ``request_id`` (after its answer was lost) answers
        the jobs the first one leased."""
        body: dict[str, Any] = {"limit": limit, "wait_seconds": wait_seconds}
        if request_id:
            body["request_id"] = request_id
        if types:
            body["types"] = types
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        answer = self._send("POST", "/jobs/claim", body, timeout=wait_seconds + self.timeout)
        jobs: list[dict[str, Any]] = answer.body["jobs"]
        if not jobs and wait_seconds > 0 and (pause := answer.retry_after):
            # The server had as many waiting long polls as it allows and answered at once: wait here
            # instead, as long as it asks (within this long poll's time), before asking again.
            time.sleep(min(pause, wait_seconds))
        return jobs

    def complete(
        self, job_id: int, lease_token: str, result: Any = None, *, then: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Report success; with ``then`` (a ``next`` body: limit, wait_seconds, types, lease_seconds), claim
        the next job(s) in the same request (docs/api.md#report-and-claim-in-one-request): the answer's
        ``next["jobs"]`` are compact WorkerJobs, as a claim's."""
        body: dict[str, Any] = {"lease_token": lease_token}
        if result is not None:
            body["result"] = result
        if then is not None:
            body["next"] = then
        return self._held_job_request(f"/jobs/{job_id}/complete", body, then)

    def complete_many(
        self, items: list[dict[str, Any]], *, then: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Complete held jobs in one request: the answer's ``results`` has one per item, each with its own
        status (an id and a status for a completed job; with its error for a refused one). With ``then``,
        claim the next job(s) in the same request, whatever each item's outcome: the answer's
        ``next["jobs"]``, as ``complete``'s."""
        body: dict[str, Any] = {"jobs": items}
        if then is not None:
            body["next"] = then
        timeout = None if then is None else then.get("wait_seconds", 0) + self.timeout
        return self.request("POST", "/jobs/complete", body, timeout=timeout)

    def fail(
        self,
        job_id: int,
        lease_token: str,
        error: str,
        *,
        retryable: bool,
        then: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Report a failed attempt; returns where the job stands (status "pending" again when it will be
        retried). With ``then``, claim the next job(s) in the same request, as ``complete``."""
        body: dict[str, Any] = {"lease_token": lease_token, "error": error, "retryable": retryable}
        if then is not None:
            body["next"] = then
        return self._held_job_request(f"/jobs/{job_id}/fail", body, then)

    def heartbeat(
        self,
        job_id: int,
        lease_token: str,
        lease_seconds: int,
        *,
        progress: int | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Extend a held job's lease, with a progress report when given; returns where the job stands
        (JobState: its new lease_expires_at, and ``cancel_requested``, which says whether to stop it)."""
        body: dict[str, Any] = {"lease_token": lease_token, "lease_seconds": lease_seconds}
        if progress is not None:
            body["progress"] = progress
        if message is not None:
            body["progress_message"] = message
        return self._held_job_request(f"/jobs/{job_id}/heartbeat", body)

    def snooze(self, job_id: int, lease_token: str, delay_seconds: float) -> dict[str, Any]:
        """Hand a held job back to run after ``delay_seconds``; returns where the job stands (pending, or
        cancelled when that was requested)."""
        body = {"lease_token": lease_token, "delay_seconds": delay_seconds}
        return self._held_job_request(f"/jobs/{job_id}/snooze", body)

    def cancelled(self, job_id: int, lease_token: str) -> dict[str, Any]:
        """Report that a held job stopped because its cancellation was requested; returns where it stands."""
        return self._held_job_request(f"/jobs/{job_id}/cancelled", {"lease_token": lease_token})

    def add_to_batch(self, batch_id: int, lease_token: str, jobs: list[dict[str, Any]]) -> list[int]:
        """Add jobs to the batch of a held job (``POST /batches/{id}/jobs``, all or none); the new jobs'
        ids. Sent at most once, never again: a lost answer may have added them."""
        body = {"lease_token": lease_token, "jobs": jobs}
        answer = self.request("POST", f"/batches/{batch_id}/jobs", body, repeatable=False)
        items = answer["jobs"] if isinstance(answer, dict) else answer
        return [item["id"] if isinstance(item, dict) else item for item in items]
