"""The worker loop: claim, run handlers on a pool of threads, heartbeat, report, shut down gracefully.

Guarantees it keeps:
- a job is reported exactly as its handler ended (result, or the exception with its traceback);
- a report that cannot be delivered (server down or restarting) is retried with backoff until it is
  delivered, the server refuses it for good (the lease was lost), or the shutdown grace period ends;
- while a job is held (running or waiting for its report) its lease is extended every third of its length;
- on SIGTERM/SIGINT it stops claiming within about ``poll_slice`` seconds (a long poll is asked for in
  requests of at most that long, and the one in flight is let finish, so no job is claimed and then
  dropped; one still unanswered a second later, from a server that hangs, is cut), lets running handlers
  finish within the grace period (counted from the signal), delivers their reports, and returns 0.
  A second signal exits at once with status 1;
- when the server refuses a claim (401: its key is unknown or revoked; 403, 422...) it says so, stops the
  same way and returns 1: asking again would not help.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from queuelog.redact import redact_error
from queuelog.wire.job import CancelRequested, Job, Snooze  # what a handler receives, and may raise
from queuelog.worker.client import QueueClient, RequestRefused, TransientError, retry_delay
from queuelog.worker.leases import Held, Line, heartbeat_loop
from queuelog.worker.reports import Report, Reporter

log = logging.getLogger("queuelog.worker")
MAX_ERROR_CHARS = 4096
STEP = 0.1  # seconds between checks for a stop request while the main thread waits


class PermanentFailure(Exception):
    """Raise from a handler when retrying cannot help (bad input, say): the job fails without retries."""


class Worker:
    """Runs ``handlers`` (job type -> function of a Job) for jobs claimed through ``client``."""

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
        poll_slice: float = 1.0,
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
        self.poll_slice = poll_slice
        self.held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._slots = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._signalled: str | None = None  # set by the signal handler, which must take no locks
        self._deadline: float | None = None  # set when shutdown starts
        self._exit_code = 0
        self._refused: str | None = None  # why the server refused to hand out work, when it did
        self._signalled_at: float | None = None
        self._claiming = False  # whether the main thread waits for a claim's answer (a stop may cut it)
        self.reporter = Reporter(
            client,
            release=self._release,
            past_deadline=self._past_deadline,
            max_backoff=max_backoff,
            then=self._then,
        )
        self._pool: ThreadPoolExecutor | None = None

    # -- control ------------------------------------------------------------------------------------

    def stop(self, reason: str = "asked to") -> None:
        """Stop claiming; finish what is held within the grace period. Safe from any thread."""
        if not self._stopping.is_set():
            log.info(
                "stopping (%s): no more claims; finishing %d held job(s) within %gs",
                reason,
                len(self.held),
                self.grace_period,
            )
            self._deadline = (self._signalled_at or time.monotonic()) + self.grace_period
            self._stopping.set()
            with self._slots:
                self._slots.notify_all()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the worker gracefully; a second one exits at once with status 1."""

        def on_signal(signum: int, _frame: Any) -> None:
            # This runs in the main thread between two of its steps, perhaps while it holds a lock: it only
            # sets a flag, which the main loop checks at least every STEP seconds and between claims.
            if self._signalled or self._stopping.is_set():
                log.warning("second signal: exiting now; held jobs will be retried when their leases expire")
                os._exit(1)
            self._signalled = signal.Signals(signum).name
            self._signalled_at = time.monotonic()  # the grace period counts from here
            if hasattr(signal, "setitimer"):  # a claim's long poll ends within poll_slice: give it that
                signal.setitimer(signal.ITIMER_REAL, self.poll_slice + 1.0)

        def on_alarm(_signum: int, _frame: Any) -> None:
            # A claim still waiting a second past its long poll gets no answer (a server or proxy that
            # hangs): cut it, so that the stop does not wait for its timeout. Only the socket is touched.
            if self._claiming:
                self.client.transport.cut()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        if hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, on_alarm)

    def _stop_requested(self) -> bool:
        if self._signalled and not self._stopping.is_set():
            self.stop(self._signalled)
        return self._stopping.is_set()

    def _pause(self, seconds: float) -> None:
        """Sleep, but return soon after a stop is requested."""
        end = time.monotonic() + seconds
        while not self._stop_requested() and (left := end - time.monotonic()) > 0:
            time.sleep(min(STEP, left))

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() > self._deadline

    # -- the loop -----------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; returns the process exit code (0 after a clean shutdown)."""
        log.info(
            "worker started: server %s, concurrency %d, job types %s (lease %ds, long poll %gs)",
            self.client.url,
            self.concurrency,
            ", ".join(self.types),
            self.lease_seconds,
            self.wait_seconds,
        )
        self._pool = pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="queuelog-job")
        threading.Thread(target=self.reporter.run, name="queuelog-reporter", daemon=True).start()
        beats = (self.client, self.lease_seconds, self._held_jobs)
        threading.Thread(target=heartbeat_loop, args=beats, name="queuelog-heartbeat", daemon=True).start()
        failures = 0
        request_id: str | None = None
        while not self._stop_requested():
            with self._slots:
                while len(self.held) >= self.concurrency and not self._stopping.is_set():
                    self._slots.wait(STEP)
                    if self._signalled:
                        break
                free = self.concurrency - len(self.held)
            if free <= 0 or self._stop_requested():
                continue
            try:
                # A claim whose answer was lost is sent again with its request id: the server answers the
                # jobs it leased then, instead of leaving them held by nobody until the lease ends.
                request_id = request_id or secrets.token_hex(16)
                self._claiming = True
                try:
                    jobs = self.client.claim(
                        limit=free,
                        wait_seconds=min(self.wait_seconds, self.poll_slice),
                        types=self.types,
                        lease_seconds=self.lease_seconds,
                        request_id=request_id,
                    )
                finally:
                    self._claiming = False
                failures = 0
                request_id = None
            except TransientError as exc:
                if self._stop_requested():
                    break
                failures += 1
                delay = retry_delay(failures, exc, self.max_backoff)
                log.warning("claim failed (%s); retrying in %.1fs", exc, delay)
                self._pause(delay)
                continue
            except RequestRefused as exc:  # a revoked key, say: asking again will not help
                if exc.status == 401:
                    self._refused = f"the server refused this worker's key ({exc})"
                else:
                    self._refused = f"the server refused its claims ({exc})"
                log.error("claim refused (%s)", exc)
                log.error("%s; stopping", self._refused)
                self._exit_code = 1
                self.stop("claims refused")
                break
            if jobs:
                log.debug("claimed %d job(s): %s", len(jobs), ", ".join(str(j["id"]) for j in jobs))
            for job in jobs:  # even when a stop came meanwhile: they are ours now, run them
                with self._lock:
                    self.held[job["id"]] = Held(job)
                pool.submit(self._run_job, job)

        # Shutdown: wait for the handlers, then for their reports, within the grace period.
        while self.held and not self._past_deadline():
            time.sleep(0.05)
        pool.shutdown(wait=False, cancel_futures=True)
        if self.held:
            log.warning(
                "stopped after the grace period with %d job(s) unreported (%s); their leases will expire "
                "and they will be retried",
                len(self.held),
                self.reporter.summary(),
            )
        elif self._refused:
            log.error("stopped, not cleanly: %s: %s", self._refused, self.reporter.summary())
        else:
            log.info("stopped cleanly: %s", self.reporter.summary())
        return self._exit_code

    def _run_job(self, raw: dict[str, Any]) -> None:
        with self._lock:
            held = self.held.get(raw["id"])
        job = Job.from_json(raw, Line(held, self.client, self.lease_seconds))
        where = f"job {job.id} ({job.type}) attempt {job.attempt}"
        if job.max_retries is not None:
            where += f" of {job.max_retries + 1}"
        started = time.perf_counter()
        try:
            result = self._call(job)
        except CancelRequested:  # docs/running-jobs.md
            log.info("%s stopped: its cancellation was requested", where)
            report = Report(raw, _ms(started), cancelled=True, error=_traceback())
        except Snooze as snooze:
            log.info("%s snoozed for %g s", where, snooze.delay_seconds)
            report = Report(raw, _ms(started), snooze=snooze.delay_seconds)
        except PermanentFailure:
            log.error("%s failed permanently: no retries", where, exc_info=True)
            report = Report(raw, _ms(started), error=_traceback(), retryable=False)
        except Exception:
            retrying = raw["retry_count"] < raw["max_retries"]
            level = logging.WARNING if retrying else logging.ERROR
            log.log(
                level, "%s failed: %s", where, "will retry" if retrying else "no retries left", exc_info=True
            )
            report = Report(raw, _ms(started), error=_traceback(), retryable=True)
        else:
            report = Report(raw, _ms(started), result=result)
        self.reporter.put(report)

    def _call(self, job: Job) -> dict[str, Any] | None:
        """Run the job's handler; its result as the server stores it (a non-dict becomes {"value": ...})."""
        handler = self.handlers.get(job.type)
        if handler is None:
            raise PermanentFailure(f"this worker has no handler for job type {job.type!r}")
        result = handler(job)
        if result is not None and not isinstance(result, dict):
            result = {"value": result}
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise PermanentFailure(f"the handler's result is not JSON: {exc}") from exc
        return result

    def _then(self) -> dict[str, Any] | None:
        """What a report asks to claim next in its own request (docs/worker.md): one job, for the slot it
        frees, without waiting (the main loop's long poll waits); nothing once stopping."""
        if self._stopping.is_set() or self._signalled:
            return None
        return {"limit": 1, "types": self.types, "lease_seconds": self.lease_seconds}

    def _release(self, job_id: int, claimed: list[dict[str, Any]]) -> None:
        """A job is settled: its slot goes to the jobs its report claimed next, if any, in the same
        step, so that the main loop never claims for a slot already taken."""
        if claimed:
            log.debug(
                "claimed %d job(s) with a report: %s", len(claimed), ", ".join(str(j["id"]) for j in claimed)
            )
        with self._slots:
            self.held.pop(job_id, None)
            for job in claimed:
                self.held[job["id"]] = Held(job)
            self._slots.notify_all()
        pool = self._pool
        for job in claimed:  # even when a stop came meanwhile: they are ours now, run them
            assert pool is not None  # run() made it before any job could be claimed
            pool.submit(self._run_job, job)

    def _held_jobs(self) -> list[Held]:
        with self._lock:
            return list(self.held.values())


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def _traceback() -> str:
    """The handler's traceback as the server will store it: redacted here first, since cutting it to its
    last MAX_ERROR_CHARS characters could cut a secret's name off and leave its value unrecognisable."""
    return redact_error(traceback.format_exc())[-MAX_ERROR_CHARS:]
