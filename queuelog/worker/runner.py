"""The worker loop: claim, run handlers on a pool of threads, heartbeat, report, shut down gracefully.

Guarantees it keeps:
- a job is reported exactly as its handler ended (result, or the exception with its traceback);
- a report that cannot be delivered (server down or restarting) is retried with backoff until it is
  delivered, the server refuses it for good (the lease was lost), or the shutdown grace period ends;
- while a job is held (running or waiting for its report) its lease is extended every third of its length;
- on SIGTERM/SIGINT it stops claiming, lets running handlers finish within the grace period, delivers
  their reports, and returns 0. A second signal stops at once.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from queuelog.worker.client import LeaseLost, QueueClient, RequestRefused, TransientError

log = logging.getLogger("queuelog.worker")
MAX_ERROR_CHARS = 4096


class PermanentFailure(Exception):
    """Raise from a handler when retrying cannot help (bad input, say): the job fails without retries."""


@dataclass(frozen=True)
class Job:
    """What a handler receives."""

    id: int
    type: str
    payload: dict[str, Any]
    attempt: int
    max_retries: int
    raw: dict[str, Any]


@dataclass
class _Held:
    job: dict[str, Any]
    lost: bool = False


class Worker:
    def __init__(
        self,
        client: QueueClient,
        handlers: dict[str, Callable[[Job], Any]],
        *,
        concurrency: int = 1,
        types: list[str] | None = None,
        lease_seconds: int = 60,
        wait_seconds: float = 10,
        grace_period: float = 30,
        max_backoff: float = 10,
    ):
        if not handlers:
            raise ValueError("a worker needs at least one handler")
        self.client = client
        self.handlers = handlers
        self.concurrency = concurrency
        self.types = types or sorted(handlers)
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self.grace_period = grace_period
        self.max_backoff = max_backoff
        self.held: dict[int, _Held] = {}
        self._lock = threading.Lock()
        self._slots = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._reports: queue.Queue[tuple[str, dict[str, Any], Any]] = queue.Queue()
        self._deadline: float | None = None  # set when shutdown starts
        self.completed = 0
        self.failed = 0

    # -- control ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; finish what is held within the grace period."""
        if not self._stopping.is_set():
            log.info("stopping: no more claims; finishing %d held job(s)", len(self.held))
            self._deadline = time.monotonic() + self.grace_period
            self._stopping.set()
            with self._slots:
                self._slots.notify_all()

    def install_signal_handlers(self) -> None:
        def on_signal(signum, _frame):
            if self._stopping.is_set():
                log.warning("second signal: exiting now")
                raise SystemExit(1)
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline

    # -- the loop -----------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; returns the process exit code (0 after a clean shutdown)."""
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="queuelog-job")
        helpers = [
            threading.Thread(target=self._report_loop, name="queuelog-reporter", daemon=True),
            threading.Thread(target=self._heartbeat_loop, name="queuelog-heartbeat", daemon=True),
        ]
        for thread in helpers:
            thread.start()
        failures = 0
        while not self._stopping.is_set():
            with self._slots:
                while len(self.held) >= self.concurrency and not self._stopping.is_set():
                    self._slots.wait(1)
                free = self.concurrency - len(self.held)
            if self._stopping.is_set():
                break
            try:
                jobs = self.client.claim(
                    limit=free,
                    wait_seconds=self.wait_seconds,
                    types=self.types,
                    lease_seconds=self.lease_seconds,
                )
                failures = 0
            except TransientError as exc:
                failures += 1
                delay = min(self.max_backoff, 0.25 * 2**failures)
                log.warning("claim failed (%s); retrying in %.1fs", exc, delay)
                self._stopping.wait(delay)
                continue
            for job in jobs:
                with self._lock:
                    self.held[job["id"]] = _Held(job)
                pool.submit(self._run_job, job)

        # Shutdown: wait for the handlers, then for their reports, within the grace period.
        while self.held and not self._past_deadline():
            time.sleep(0.05)
        pool.shutdown(wait=False, cancel_futures=True)
        if self.held:
            log.warning(
                "grace period over with %d job(s) unreported; their leases will expire and they will "
                "be retried",
                len(self.held),
            )
        else:
            log.info("stopped cleanly: %d completed, %d failed", self.completed, self.failed)
        return 0

    def _run_job(self, raw: dict[str, Any]) -> None:
        job = Job(raw["id"], raw["type"], raw["payload"], raw["retry_count"] + 1, raw["max_retries"], raw)
        handler = self.handlers.get(job.type)
        try:
            if handler is None:
                raise PermanentFailure(f"this worker has no handler for job type {job.type!r}")
            result = handler(job)
            if result is not None and not isinstance(result, dict):
                result = {"value": result}
            self._reports.put(("complete", raw, result))
        except PermanentFailure:
            self._reports.put(("fail", raw, (traceback.format_exc()[-MAX_ERROR_CHARS:], False)))
        except Exception:
            self._reports.put(("fail", raw, (traceback.format_exc()[-MAX_ERROR_CHARS:], True)))

    # -- reporting ----------------------------------------------------------------------------------

    def _release(self, job_id: int, outcome: str) -> None:
        with self._slots:
            self.held.pop(job_id, None)
            self._slots.notify_all()
        if outcome == "complete":
            self.completed += 1
        elif outcome == "fail":
            self.failed += 1

    def _report_loop(self) -> None:
        failures = 0
        while True:
            kind, raw, detail = self._reports.get()
            batch = [(kind, raw, detail)]
            if kind == "complete":  # gather whatever else has finished, for one batch request
                while len(batch) < 100:
                    try:
                        item = self._reports.get_nowait()
                    except queue.Empty:
                        break
                    if item[0] != "complete":
                        self._reports.put(item)
                        break
                    batch.append(item)
            while True:
                try:
                    self._deliver(batch)
                    failures = 0
                    break
                except TransientError as exc:
                    if self._past_deadline():
                        log.error("giving up on %d report(s) at shutdown: %s", len(batch), exc)
                        for _, item, _ in batch:
                            self._release(item["id"], "abandoned")
                        break
                    failures += 1
                    delay = min(self.max_backoff, 0.25 * 2**failures)
                    log.warning("report failed (%s); retrying in %.1fs", exc, delay)
                    time.sleep(delay)

    def _deliver(self, batch: list[tuple[str, dict[str, Any], Any]]) -> None:
        kind = batch[0][0]
        if kind == "complete":
            items = [{"id": raw["id"], "lease_token": raw["lease_token"]} for _, raw, _ in batch]
            for item, (_, _, result) in zip(items, batch, strict=True):
                if result is not None:
                    item["result"] = result
            try:
                results = self.client.complete_many(items)
            except RequestRefused as exc:  # e.g. a result over the size limit: report it as a failure
                log.error("completion refused (%s); reporting the jobs as failed", exc)
                for _, raw, _ in batch:
                    self._reports.put(("fail", raw, (f"result refused by the server: {exc}", False)))
                return
            for outcome in results:
                if outcome["status"] != 200:
                    log.warning(
                        "job %s: completion refused (%s): the lease was lost",
                        outcome["id"],
                        outcome["error"]["detail"],
                    )
                self._release(outcome["id"], "complete" if outcome["status"] == 200 else "lost")
        else:
            _, raw, (error, retryable) = batch[0]
            try:
                self.client.fail(raw["id"], raw["lease_token"], error, retryable=retryable)
            except LeaseLost as exc:
                log.warning("job %s: failure report refused (%s): the lease was lost", raw["id"], exc)
                self._release(raw["id"], "lost")
                return
            self._release(raw["id"], "fail")

    # -- leases -------------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        interval = self.lease_seconds / 3
        while True:
            time.sleep(interval)
            with self._lock:
                held = [h for h in self.held.values() if not h.lost]
            for entry in held:
                try:
                    self.client.heartbeat(entry.job["id"], entry.job["lease_token"], self.lease_seconds)
                except LeaseLost as exc:
                    log.warning("job %s: lease lost (%s); it may run elsewhere too", entry.job["id"], exc)
                    entry.lost = True
                except (TransientError, RequestRefused) as exc:
                    log.warning("heartbeat for job %s failed: %s", entry.job["id"], exc)
