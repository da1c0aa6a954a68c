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
    if job.payload.get("steps"):  # docs/running-jobs.md: progress reports, each a point to stop at
        steps = int(job.payload["steps"])
        for step in range(1, steps + 1):
            time.sleep(float(job.payload.get("step_sleep", 0.1)))
            job.report_progress(100 * step // steps, f"step {step} of {steps}")
    if job.payload.get("watch_cancel"):  # no progress reports: the flag the heartbeats set
        deadline = time.monotonic() + float(job.payload["watch_cancel"])
        while not job.should_stop() and time.monotonic() < deadline:
            time.sleep(0.05)
        job.check_cancelled()
    if job.payload.get("add"):  # docs/worker.md#adding-jobs-to-its-batch: a pdf job per item, then a join
        added = job.add_to_batch([{"type": "pdf", "payload": {"n": n}} for n in job.payload["add"]])
        join = job.add_to_batch([{"type": "pdf", "payload": {"join": True}, "depends_on": added}])
        return {"added": added + join}
    if job.payload.get("snooze") and job.snooze_count < int(job.payload.get("snoozes", 1)):
        job.snooze(float(job.payload["snooze"]))
    return {"n": job.payload.get("n"), "attempt": job.attempt}


@handles("pdf")
def pdf(job):
    return "rendered"
