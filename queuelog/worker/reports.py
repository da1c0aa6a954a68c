"""Delivering what handlers did to the server, and logging how each job ended.

One thread delivers reports in order: completions are gathered into batch requests, failures go one by
one. A report that cannot be delivered (server down or restarting) is retried with backoff until it is
delivered, the server refuses it, or the shutdown grace period ends. Once the server has answered, the
job's line is logged at INFO: its id, type, outcome and how long its handler ran.
"""

from __future__ import annotations

import logging
import queue
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from queuelog.worker.client import LeaseLost, QueueClient, RequestRefused, TransientError, retry_delay

log = logging.getLogger("queuelog.worker")

MAX_BATCH = 100  # the server's limit for one POST /jobs/complete
MAX_CLAIM = 100  # the server's limit for one claim (a report's next too)

# How a job ended, as logged and counted.
COMPLETED = "completed"
RETRYING = "failed, will retry"
FAILED = "failed for good"
PERMANENT = "permanent failure"
LOST = "lost lease"
UNREPORTED = "unreported"  # given up at shutdown, or refused: the lease will expire
CANCELLED = "cancelled"  # stopped after its cancellation was requested (docs/running-jobs.md)
SNOOZED = "snoozed"  # handed back to run later
FAILURES = (RETRYING, FAILED, PERMANENT)


@dataclass(frozen=True)
class Report:
    """What one handler run ended with: a result, or an error (its traceback) and whether to retry."""

    job: dict[str, Any]  # the job as claimed (id, type, lease_token, ...)
    ms: int  # how long the handler ran
    result: dict[str, Any] | None = None
    error: str | None = None
    retryable: bool = True
    alone: bool = False  # deliver in a request of its own (its batch was refused)
    cancelled: bool = False  # the handler stopped for a cancellation request; ``error`` if refused
    snooze: float | None = None  # the handler asked to run again after this many seconds

    @property
    def batched(self) -> bool:
        """A completion, delivered with the others waiting (everything else goes alone)."""
        return self.error is None and self.snooze is None and not self.alone

    @property
    def label(self) -> str:
        return f"job {self.job['id']} ({self.job['type']})"


class Reporter:
    """Delivers reports from a thread of its own; calls ``release(job_id)`` once a job is settled."""

    def __init__(
        self,
        client: QueueClient,
        *,
        release: Callable[[int, list[dict[str, Any]]], None],
        past_deadline: Callable[[], bool],
        max_backoff: float = 10,
        then: Callable[[], dict[str, Any] | None] = lambda: None,
    ):
        self.client = client
        self.release = release
        self.then = then  # what to claim in a report's request (its ``next``), or None
        self.past_deadline = past_deadline
        self.max_backoff = max_backoff
        self.counts: Counter[str] = Counter()
        self._queue: queue.Queue[Report] = queue.Queue()

    def put(self, report: Report) -> None:
        self._queue.put(report)

    def summary(self) -> str:
        """E.g. "3 completed, 1 failed, 0 lost lease"."""
        failed = sum(self.counts[o] for o in FAILURES)
        text = f"{self.counts[COMPLETED]} completed, {failed} failed, {self.counts[LOST]} lost lease"
        others = [f"{self.counts[o]} {o}" for o in (CANCELLED, SNOOZED) if self.counts[o]]
        return ", ".join([text, *others])

    def run(self) -> None:
        """The thread's loop: never returns."""
        failures = 0
        while True:
            batch = self._next_batch()
            # The claim a report makes in its request has an id of its own, the same each time the
            # report is sent again: sent again after its answer was lost, it answers the jobs the first
            # one claimed instead of leaving them held by nobody (docs/operations.md#outages).
            request_id = secrets.token_hex(16)
            while True:
                try:
                    self._deliver(batch, request_id)
                    failures = 0
                    break
                except TransientError as exc:
                    if self.past_deadline():
                        log.error("giving up on %d report(s) at shutdown: %s", len(batch), exc)
                        for report in batch:
                            self._finished(report, UNREPORTED)
                        break
                    failures += 1
                    delay = retry_delay(failures, exc, self.max_backoff)
                    log.warning("report failed (%s); retrying in %.1fs", exc, delay)
                    time.sleep(delay)

    def _next_batch(self) -> list[Report]:
        """The next failure alone, or the next completion with whatever other completions are waiting."""
        first = self._queue.get()
        batch = [first]
        if not first.batched:
            return batch
        while len(batch) < MAX_BATCH:
            try:
                report = self._queue.get_nowait()
            except queue.Empty:
                break
            if not report.batched:
                self._queue.put(report)  # its turn comes next
                break
            batch.append(report)
        return batch

    def _then(self, request_id: str) -> dict[str, Any] | None:
        """What the report asks to claim next, with its request id; None when nothing."""
        then = self.then()
        return None if then is None else {**then, "request_id": request_id}

    def _deliver(self, batch: list[Report], request_id: str) -> None:
        report = batch[0]
        if report.cancelled or report.snooze is not None:
            self._hand_back(report)
            return
        if report.error is None:
            self._complete(batch, request_id)
            return
        then = self._then(request_id)
        try:
            job = self.client.fail(
                report.job["id"],
                report.job["lease_token"],
                report.error,
                retryable=report.retryable,
                then=then,
            )
        except LeaseLost as exc:
            log.warning("%s: failure report refused (%s): the lease was lost", report.label, exc)
            self._finished(report, LOST)
            return
        except RequestRefused as exc:
            log.error("%s: failure report refused (%s); its lease will expire", report.label, exc)
            self._finished(report, UNREPORTED)
            return
        claimed = _claimed(job)
        if job["status"] == "cancelled":  # its cancellation had been requested
            self._finished(report, CANCELLED, claimed)
        elif job["status"] == "pending":
            self._finished(report, RETRYING, claimed)
        else:
            self._finished(report, FAILED if report.retryable else PERMANENT, claimed)

    def _complete(self, batch: list[Report], request_id: str) -> None:
        then = self._then(request_id)
        if len(batch) == 1 and then is not None:
            self._complete_then_claim(batch[0], then)
            return
        items = []
        for report in batch:
            item = {"id": report.job["id"], "lease_token": report.job["lease_token"]}
            if report.result is not None:
                item["result"] = report.result
            items.append(item)
        if then is not None:  # a job for each slot the batch frees, claimed in the same request
            then = {**then, "limit": min(MAX_CLAIM, then.get("limit", 1) * len(batch))}
        try:
            answer = self.client.complete_many(items, then=then)
        except RequestRefused as exc:  # e.g. a result over the size limit
            if len(batch) > 1:  # find out which: one request per job
                log.warning("completion of %d jobs refused (%s); sending them one by one", len(batch), exc)
                for report in batch:
                    self.put(replace(report, alone=True))
                return
            report = batch[0]
            log.error("%s: completion refused (%s); reporting it as failed", report.label, exc)
            self.put(replace(report, error=f"result refused by the server: {exc}", retryable=False))
            return
        by_id = {report.job["id"]: report for report in batch}
        claimed = _claimed(answer)  # handed over with the first job released: the slots are counted
        for outcome in answer["results"]:
            report = by_id[outcome["id"]]
            if outcome["status"] == 200:
                self._finished(report, COMPLETED, claimed)
            else:
                detail = outcome.get("error", {}).get("detail")
                log.warning("%s: completion refused (%s): the lease was lost", report.label, detail)
                self._finished(report, LOST, claimed)
            claimed = []

    def _complete_then_claim(self, report: Report, then: dict[str, Any]) -> None:
        """One completion, and the next job(s) claimed in the same request."""
        try:
            job = self.client.complete(report.job["id"], report.job["lease_token"], report.result, then=then)
        except LeaseLost as exc:
            log.warning("%s: completion refused (%s): the lease was lost", report.label, exc)
            self._finished(report, LOST)
            return
        except RequestRefused as exc:  # e.g. a result over the size limit
            log.error("%s: completion refused (%s); reporting it as failed", report.label, exc)
            self.put(replace(report, error=f"result refused by the server: {exc}", retryable=False))
            return
        self._finished(report, COMPLETED, _claimed(job))

    def _hand_back(self, report: Report) -> None:
        """Deliver a cancellation or a snooze; one the server refuses (a snooze over the limit, a
        cancellation nobody asked for) goes again as a retryable failure."""
        job_id, token = report.job["id"], report.job["lease_token"]
        try:
            if report.cancelled:
                job = self.client.cancelled(job_id, token)
            else:
                assert report.snooze is not None  # not cancelled: a snooze (the caller's test)
                job = self.client.snooze(job_id, token, report.snooze)
        except LeaseLost as exc:
            log.warning("%s: report refused (%s): the lease was lost", report.label, exc)
            self._finished(report, LOST)
            return
        except RequestRefused as exc:
            log.warning("%s: %s refused (%s); reporting it as failed", report.label, _kind(report), exc)
            error = report.error or f"snooze refused by the server: {exc}"
            self.put(replace(report, cancelled=False, snooze=None, error=error))
            return
        self._finished(report, CANCELLED if job["status"] == "cancelled" else SNOOZED)

    def _finished(self, report: Report, outcome: str, claimed: list[dict[str, Any]] | None = None) -> None:
        """Count and log how the job ended; release it, with the jobs its report claimed next."""
        self.counts[outcome] += 1
        log.info("%s %s; ran %d ms", report.label, outcome, report.ms)
        self.release(report.job["id"], claimed or [])


def _claimed(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs a report's answer says it claimed next (none when it asked for none)."""
    return answer.get("next", {}).get("jobs", [])


def _kind(report: Report) -> str:
    return "cancellation" if report.cancelled else "snooze"
