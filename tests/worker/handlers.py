"""Handlers the worker tests run in real queuelog-worker processes."""

import time

from queuelog.worker import PermanentFailure, handles


@handles("email")
def email(job):
    """Sleeps `sleep_first` seconds on the first attempt only, `sleep` on every attempt; then fails or
    returns as the payload says."""
    if job.attempt == 1:
        time.sleep(float(job.payload.get("sleep_first", 0)))
    time.sleep(float(job.payload.get("sleep", 0)))
    if job.payload.get("fail"):
        raise RuntimeError(f"{job.payload['fail']} password=swordfish")
    if job.payload.get("fail_permanently"):
        raise PermanentFailure(job.payload["fail_permanently"])
    if job.payload.get("result_bytes"):  # over the server's size limit for results, say
        return {"blob": "x" * int(job.payload["result_bytes"])}
    if job.payload.get("not_json"):
        return {"n": {1, 2}}
    return {"n": job.payload.get("n"), "attempt": job.attempt}


@handles("pdf")
def pdf(job):
    return "rendered"
