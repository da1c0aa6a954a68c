"""Demo handlers for the README walkthrough: ``queuelog-worker --handlers queuelog.worker.demo``.

Payload switches: ``{"sleep": seconds}`` makes a handler slow, ``{"fail": "message"}`` raises a retryable
error, ``{"fail_permanently": "message"}`` fails at once without retries.
"""

from __future__ import annotations

import time

from queuelog.worker import PermanentFailure, handles


def _common(job) -> None:
    time.sleep(float(job.payload.get("sleep", 0)))
    if "fail_permanently" in job.payload:
        raise PermanentFailure(str(job.payload["fail_permanently"]))
    if "fail" in job.payload:
        raise RuntimeError(str(job.payload["fail"]))


@handles("email")
def send_email(job):
    _common(job)
    return {"sent_to": job.payload.get("to", "nobody@example.com"), "attempt": job.attempt}


@handles("pdf")
def render_pdf(job):
    _common(job)
    return {"pages": len(str(job.payload.get("text", ""))) // 2000 + 1}


@handles("sync")
def sync(job):
    _common(job)
    return {"synced": True}
