"""``Client``: enqueue jobs, read them, cancel them and wait for them, over the JSON API.

Every request that gets no answer, or a 502, 503 or 504, is sent again, the same bytes each time, up to
``retries`` more times with a growing, jittered pause (a ``Retry-After`` the server gives is honoured, up
to ``max_backoff``). Enqueues can be retried safely because each carries an idempotency key: the caller's,
or one the client makes up for that call, so a retry finds the job its first attempt made instead of making
a second one (docs/concepts.md#idempotency). Any other answer of 400 or more is raised at once as the error of its
problem type (``queuelog.client.errors``).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from queuelog.client.errors import (
    BatchWaitTimeout,
    ConnectionFailed,
    InvalidState,
    JobCancelled,
    JobFailed,
    QueuelogError,
    WaitTimeout,
    from_answer,
)
from queuelog.client.shapes import (
    Batch,
    BatchPage,
    JobPage,
    callback_body,
    job_body,
    member_body,
    rfc3339,
)
from queuelog.wire.job import Event, Job
from queuelog.wire.transport import NoAnswer, Transport

RETRIED_STATUSES = frozenset({502, 503, 504})


def _job_path(job_id: int, action: str = "") -> str:
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        raise TypeError(f"a job id is an int, not {job_id!r}")
    return f"/jobs/{job_id}{action}"


def _batch_path(batch_id: int, action: str = "") -> str:
    if not isinstance(batch_id, int) or isinstance(batch_id, bool):
        raise TypeError(f"a batch id is an int, not {batch_id!r}")
    return f"/batches/{batch_id}{action}"


class Client:
    """A producer's connection to one queuelog server: ``url`` is the server's base URL, ``key`` a
    producer key (or an admin's). Safe to share between threads (one connection per thread)."""

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
    ):
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.transport = Transport(url, key, timeout=timeout)
        self.url = self.transport.url  # without any user:password@ part: safe to log
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close this thread's connection; the next call opens a new one."""
        self.transport.close()

    # -- sending --------------------------------------------------------------------------------------

    def _pause(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry number ``attempt``: half of ``backoff * 2^(attempt-1)`` plus a random part
        up to the other half (capped at ``max_backoff``), or the server's Retry-After if that is longer."""
        ceiling = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        pause = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            pause = max(pause, min(retry_after, self.max_backoff))
        return pause

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        retries: int | None = None,
    ) -> Any:
        """Send one request, retrying as the module says; returns the decoded answer of a 2xx, or raises
        the ``QueuelogError`` of the last answer (``ConnectionFailed`` when there was none). The error's
        ``attempts`` says how many times the request was sent. ``retries`` overrides the client's: give 0
        for a request that is not safe to send twice, and it is sent exactly once (unless it is a GET or
        carries an ``Idempotency-Key`` header, which a server-dropped kept-alive connection may resend)."""
        retries = self.retries if retries is None else retries
        keyed = any(name.lower() == "idempotency-key" for name in headers or ())
        return self._send(method, path, body, headers, retries, method == "GET" or keyed or retries > 0)

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        headers: dict[str, str] | None,
        retries: int,
        repeatable: bool,
    ) -> Any:
        """``request``, where ``repeatable`` says whether the request may reach the server twice (an
        enqueue with its idempotency key may: the server finds the job the first one made). Every time it
        goes out counts, the transport's own second send on a dropped kept-alive connection too: at most
        ``retries + 1`` sends (with ``retries`` 0, a repeatable request may still go out twice), and the
        error's ``attempts`` is how many there were."""
        sent = tries = 0
        while True:
            tries += 1
            # The transport may send it again at once only while this call has a send to spare.
            again = repeatable and (retries == 0 or sent + 2 <= retries + 1)
            try:
                answer = self.transport.send(method, path, body, headers=headers, repeatable=again)
            except NoAnswer as exc:
                sent += exc.sends
                error: QueuelogError = ConnectionFailed(str(exc), title="No answer")
            else:
                sent += answer.sends
                if 200 <= answer.status < 300:
                    return answer.body
                error = from_answer(answer.status, answer.body, answer.retry_after)
                if answer.status not in RETRIED_STATUSES:
                    error.attempts = sent
                    raise error
            if sent > retries:
                error.attempts = sent
                raise error
            time.sleep(self._pause(tries, error.retry_after))

    # -- enqueueing -----------------------------------------------------------------------------------

    def enqueue(
        self,
        type: str,
        payload: dict[str, Any] | None = None,
        *,
        priority: str | None = None,
        max_retries: int | None = None,
        run_at: datetime | str | None = None,
        delay_seconds: float | None = None,
        idempotency_key: str | None = None,
        depends_on: Iterable[int] | None = None,
        on_dependency_failure: str | None = None,
    ) -> Job:
        """Enqueue one job and return it. Without an ``idempotency_key`` the client makes one up (a UUID),
        so that its own retries cannot make the job twice; give your own to make a repeated call (after
        a crash of your program, say) find the job the first one made.

        With ``depends_on`` (job ids) the job starts ``waiting`` and runs once they have all completed;
        when one fails or is cancelled it is cancelled too, unless ``on_dependency_failure="run"``
        (docs/batches.md)."""
        body = job_body(
            type,
            payload,
            priority=priority,
            max_retries=max_retries,
            run_at=run_at,
            delay_seconds=delay_seconds,
            idempotency_key=idempotency_key or str(uuid.uuid4()),
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
        )
        return Job.from_json(self._send("POST", "/jobs", body, None, self.retries, True))

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[Job]:
        """Enqueue up to 500 jobs in one request, all or nothing (``POST /jobs/batch``); each item holds
        the arguments of ``enqueue``, e.g. ``{"type": "email", "payload": {...}}``. Returns the jobs in
        order. A ``ValidationFailed`` names the item (``jobs[3].type``) and nothing was made.

        ``idempotency_key`` is one key for the whole batch (job *i* gets ``KEY#i``); without it, items
        without a key of their own get one the client makes up the same way."""
        bodies = [job_body(**item) for item in jobs]
        headers = None
        if idempotency_key is not None:
            headers = {"Idempotency-Key": idempotency_key}
        else:
            batch = str(uuid.uuid4())
            for i, body in enumerate(bodies):
                body.setdefault("idempotency_key", f"{batch}#{i}")
        answer = self._send("POST", "/jobs/batch", {"jobs": bodies}, headers, self.retries, True)
        return [Job.from_json(item) for item in answer["jobs"]]

    # -- reading --------------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job as this key may see it; ``NotFound`` if there is none it may see."""
        return Job.from_json(self.request("GET", _job_path(job_id)))

    def events(self, job_id: int) -> list[Event]:
        """The job's history, oldest first."""
        answer = self.request("GET", _job_path(job_id, "/events"))
        return [Event.from_json(item) for item in answer["events"]]

    def list(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        priority: str | None = None,
        batch_id: int | None = None,
        worker: str | None = None,
        created_from: datetime | str | None = None,
        created_to: datetime | str | None = None,
        finished_from: datetime | str | None = None,
        finished_to: datetime | str | None = None,
        error: str | None = None,
        payload_path: str | None = None,
        payload_value: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPage:
        """One page of jobs, newest first: a producer's own, or every job for an admin, narrowed by the
        search filters of ``GET /jobs`` (docs/api.md#searching-and-paging-the-list; ``error`` is for admins;
        ``batch_id`` keeps a batch's members). Times are aware
        datetimes or RFC 3339 text. ``cursor`` is the ``next_cursor`` of the page before; a page that
        examined its whole search window says so in ``window_full`` and still has a cursor."""
        filters = {
            "status": status,
            "type": type,
            "priority": priority,
            "batch_id": batch_id,
            "worker": worker,
            "created_from": created_from,
            "created_to": created_to,
            "finished_from": finished_from,
            "finished_to": finished_to,
            "error": error,
            "payload_path": payload_path,
            "payload_value": payload_value,
            "limit": limit,
            "cursor": cursor,
        }
        query = urlencode(
            {k: rfc3339(v, k) if isinstance(v, datetime) else v for k, v in filters.items() if v is not None}
        )
        answer = self.request("GET", "/jobs" + (f"?{query}" if query else ""))
        jobs = [Job.from_json(item) for item in answer["jobs"]]
        return JobPage(jobs, answer["next_cursor"], bool(answer.get("window_full", False)))

    def pages(self, **filters: Any) -> Iterator[JobPage]:
        """Every page of ``list(**filters)``, following the cursors, one request per page as it is read."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list(cursor=cursor, **filters)
            yield page
            cursor = page.next_cursor
            if cursor is None:
                return

    def iter_jobs(self, **filters: Any) -> Iterator[Job]:
        """Every job ``list(**filters)`` finds, across all pages, newest first."""
        for page in self.pages(**filters):
            yield from page.jobs

    # -- acting ---------------------------------------------------------------------------------------

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending job, or ask the worker of a running one to stop it (the job comes back still
        running, ``cancel_requested``; docs/running-jobs.md); returns it. ``InvalidState`` when it is
        neither — unless an earlier attempt of this very call got no answer and the job is now cancelled:
        then it returns the job, as the first attempt would have."""
        try:
            return Job.from_json(self.request("POST", _job_path(job_id, "/cancel")))
        except InvalidState as exc:
            if exc.attempts > 1:
                job = self.get(job_id)
                if job.status == "cancelled":
                    return job
            raise

    def wait(
        self, job_id: int, timeout: float = 60.0, *, interval: float = 0.1, max_interval: float = 5.0
    ) -> Job:
        """Poll the job until it finishes: the first poll at once, then after ``interval`` seconds, growing
        by half each time up to ``max_interval``. Returns the completed job (its ``result``); raises
        ``JobFailed`` or ``JobCancelled`` (with the job), or ``WaitTimeout`` once ``timeout`` seconds
        have passed (with the job as last seen)."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job.status == "completed":
                return job
            if job.status == "failed":
                detail = f"job {job.id} failed after {job.attempt} attempt(s)"
                if job.error:  # admins see it: its last line names the exception
                    detail += ": " + job.error.strip().splitlines()[-1]
                raise JobFailed(job, "Job failed", detail)
            if job.status == "cancelled":
                raise JobCancelled(job, "Job cancelled", f"job {job.id} was cancelled")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(job, "Timed out", f"job {job.id} is still {job.status} after {timeout:g}s")
            time.sleep(min(interval, left))
            interval = min(max_interval, interval * 1.5)

    # -- batches (docs/batches.md) ---------------------------------------------------------------------

    def batch(
        self,
        jobs: Iterable[Mapping[str, Any]],
        *,
        on_success: Mapping[str, Any] | None = None,
        on_finish: Mapping[str, Any] | None = None,
        description: str | None = None,
        idempotency_key: str | None = None,
    ) -> Batch:
        """Enqueue up to 1,000 jobs as one batch, all or nothing (``POST /batches``); each item holds the
        arguments of ``enqueue`` and may add a ``ref``, a name that later items give in their
        ``depends_on`` beside job ids. ``on_success`` (when every member completed) and ``on_finish``
        (when every member finished, however) are the arguments of ``enqueue`` for the callback jobs.
        A ``ValidationFailed`` names the item (``jobs[3].depends_on[0]``) and nothing was made.

        Without an ``idempotency_key`` the client makes one up (sent as the ``Idempotency-Key``
        header), so that its retries find the batch the first attempt made."""
        body: dict[str, Any] = {"jobs": [member_body(item) for item in jobs]}
        if description is not None:
            body["description"] = description
        if on_success is not None:
            body["on_success"] = callback_body(**on_success)
        if on_finish is not None:
            body["on_finish"] = callback_body(**on_finish)
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        return Batch.from_json(self._send("POST", "/batches", body, headers, self.retries, True))

    def get_batch(self, batch_id: int) -> Batch:
        """The batch as this key may see it (its owner's, or an admin's); ``NotFound`` otherwise."""
        return Batch.from_json(self.request("GET", _batch_path(batch_id)))

    def list_batches(
        self,
        *,
        status: str | None = None,
        owner: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> BatchPage:
        """One page of batches, newest first: a producer's own, or every one for an admin (``owner``
        narrows an admin's). ``cursor`` is the ``next_cursor`` of the page before."""
        filters = {"status": status, "owner": owner, "limit": limit, "cursor": cursor}
        query = urlencode({k: v for k, v in filters.items() if v is not None})
        answer = self.request("GET", "/batches" + (f"?{query}" if query else ""))
        batches = [Batch.from_json(item) for item in answer["batches"]]
        return BatchPage(batches, answer["next_cursor"])

    def cancel_batch(self, batch_id: int) -> Batch:
        """Cancel the batch's pending and waiting members, and ask the workers of its running ones to stop
        them (``POST /batches/{id}/cancel``); returns the batch."""
        return Batch.from_json(self.request("POST", _batch_path(batch_id, "/cancel")))

    def retry_batch(self, batch_id: int) -> Batch:
        """Admins: put the batch's failed and cancelled members back to pending (or waiting); the batch
        is running again. Returns it."""
        return Batch.from_json(self.request("POST", _batch_path(batch_id, "/retry")))

    def wait_batch(
        self, batch_id: int, timeout: float = 60.0, *, interval: float = 0.1, max_interval: float = 5.0
    ) -> Batch:
        """Poll the batch until every member has finished, pausing as ``wait`` does; returns it, whether
        it ``succeeded`` or ``finished_with_failures`` (see ``status`` and ``counts``). Raises
        ``BatchWaitTimeout`` (with the batch as last seen) once ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while True:
            batch = self.get_batch(batch_id)
            if batch.finished:
                return batch
            left = deadline - time.monotonic()
            if left <= 0:
                raise BatchWaitTimeout(
                    batch,
                    "Timed out",
                    f"batch {batch.id} is still running after {timeout:g}s: "
                    f"{batch.done} of {batch.total} jobs finished",
                )
            time.sleep(min(interval, left))
            interval = min(max_interval, interval * 1.5)
