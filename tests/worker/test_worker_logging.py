"""What a real queuelog-worker process logs at its default log level (INFO), against a real server.

The README's "With the worker client" section describes the worker; these tests hold it to: a line per
finished job with its id, type, outcome and run time, and a failing handler's traceback.
"""

from __future__ import annotations

import re
import signal

from tests.worker.processes import FAST, session, wait_until

LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) queuelog\.worker: (?P<message>.*)$")


def records(text: str) -> list[tuple[str, str]]:
    """(level, message with any traceback lines that follow it) for each log record in ``text``."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            out.append((match["level"], match["message"]))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def finished(text: str, job_id: int, job_type: str) -> list[tuple[str, str, int]]:
    """(level, outcome, ms) of each "job N (type) <outcome>; ran N ms" line for the job."""
    pattern = re.compile(rf"^job {job_id} \({job_type}\) (?P<outcome>[a-z ,]+); ran (?P<ms>\d+) ms$")
    return [
        (level, m["outcome"], int(m["ms"]))
        for level, message in records(text)
        if (m := pattern.match(message))
    ]


def test_default_level_logs_each_finished_job_and_failing_handlers_tracebacks(
    app, keys, live_server, workers
):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))

    def enqueue(body: dict) -> int:
        return producer.post(f"{server.url}/jobs", json=body).json()["id"]

    done = [enqueue({"type": "email", "payload": {"n": n}}) for n in range(3)]
    slow = enqueue({"type": "email", "payload": {"sleep": 0.3}})
    scalar = enqueue({"type": "pdf"})
    flaky = enqueue({"type": "email", "max_retries": 1, "payload": {"fail": "smtp down"}})
    doomed = enqueue({"type": "email", "payload": {"fail_permanently": "bad address"}})
    proc = workers.start(
        server.url, keys.raw("worker", "w-log"), "--concurrency", "2", "--wait-seconds", "1", log_level=None
    )

    def all_settled() -> bool:
        states = [
            producer.get(f"{server.url}/jobs/{i}").json()["status"] for i in (*done, slow, flaky, doomed)
        ]
        return all(s in ("completed", "failed") for s in states)

    wait_until(all_settled, 30, "every job to complete or fail")
    # The last line of a job comes after its report was answered; the answer may reach us first.
    wait_until(lambda: finished(workers.output(proc), flaky, "email")[1:], 10, "the retried job's last line")
    wait_until(lambda: finished(workers.output(proc), doomed, "email"), 10, "the failed job's line")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    text = workers.output(proc)
    logged = records(text)

    assert (
        "INFO",
        f"worker started: server {server.url}, concurrency 2, job types email, pdf (lease 60s, long poll 1s)",
    ) in logged
    for job_id in done:
        assert [(level, outcome) for level, outcome, _ in finished(text, job_id, "email")] == [
            ("INFO", "completed")
        ]
    assert [(level, outcome) for level, outcome, _ in finished(text, scalar, "pdf")] == [
        ("INFO", "completed")
    ]
    [(_, _, slow_ms)] = finished(text, slow, "email")
    assert 300 <= slow_ms < 10_000  # the handler slept 0.3 s
    assert [(level, outcome) for level, outcome, _ in finished(text, flaky, "email")] == [
        ("INFO", "failed, will retry"),
        ("INFO", "failed for good"),
    ]
    assert [(level, outcome) for level, outcome, _ in finished(text, doomed, "email")] == [
        ("INFO", "permanent failure")
    ]

    # Each failing run's traceback: WARNING while retries remain, ERROR for the last attempt.
    def failure(prefix: str) -> tuple[str, str]:
        [found] = [(level, message) for level, message in logged if message.startswith(prefix)]
        return found

    level, message = failure(f"job {flaky} (email) attempt 1 of 2 failed: will retry")
    assert level == "WARNING"
    assert "Traceback (most recent call last):" in message and "RuntimeError: smtp down" in message
    level, message = failure(f"job {flaky} (email) attempt 2 of 2 failed: no retries left")
    assert level == "ERROR"
    assert "Traceback (most recent call last):" in message and "RuntimeError: smtp down" in message
    level, message = failure(f"job {doomed} (email) attempt 1 of 4 failed permanently")
    assert level == "ERROR" and "PermanentFailure: bad address" in message

    assert not [record for record in logged if record[0] == "DEBUG"]  # INFO is the default
    assert ("INFO", "stopping (SIGTERM): no more claims; finishing 0 held job(s) within 30s") in logged
    assert ("INFO", "stopped cleanly: 5 completed, 3 failed, 0 lost lease") in logged


def test_a_job_whose_lease_ran_out_while_its_worker_was_frozen_is_logged_as_lost(
    app, keys, live_server, workers
):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job_id = producer.post(
        f"{server.url}/jobs", json={"type": "email", "payload": {"n": 1, "sleep_first": 2}}
    ).json()["id"]
    frozen = workers.start(
        server.url, keys.raw("worker", "frozen"), "--lease-seconds", "5", "--wait-seconds", "1"
    )
    wait_until(
        lambda: producer.get(f"{server.url}/jobs/{job_id}").json()["status"] == "running", 20, "the claim"
    )
    frozen.send_signal(signal.SIGSTOP)  # no heartbeats now: the 5 s lease runs out
    try:
        rescuer = workers.start(server.url, keys.raw("worker", "rescuer"), "--wait-seconds", "1")
        wait_until(
            lambda: producer.get(f"{server.url}/jobs/{job_id}").json()["status"] == "completed",
            30,
            "the rescuer to complete the job",
        )
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_until(lambda: finished(workers.output(frozen), job_id, "email"), 20, "the frozen worker's line")
    [(level, outcome, ms)] = finished(workers.output(frozen), job_id, "email")
    assert (level, outcome) == ("INFO", "lost lease") and ms >= 2000
    assert [(o[0], o[1]) for o in finished(workers.output(rescuer), job_id, "email")] == [
        ("INFO", "completed")
    ]
    for proc in (frozen, rescuer):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert "stopped cleanly: 0 completed, 0 failed, 1 lost lease" in workers.output(frozen)


def test_results_the_server_cannot_take_fail_only_their_own_jobs(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    payloads = {"fine": {"n": 1}, "big": {"result_bytes": 70_000}, "odd": {"not_json": True}}
    ids = {
        name: producer.post(
            f"{server.url}/jobs", json={"type": "email", "payload": {**p, "sleep": 0.5}}
        ).json()["id"]
        for name, p in payloads.items()
    }
    # Three at once: their reports are likely to meet in one batch, which the big result gets refused.
    proc = workers.start(server.url, keys.raw("worker", "w"), "--concurrency", "3", "--wait-seconds", "1")

    def settled():
        jobs = {name: admin.get(f"{server.url}/jobs/{i}").json() for name, i in ids.items()}
        return all(j["status"] in ("completed", "failed") for j in jobs.values()) and jobs

    jobs = wait_until(settled, 30, "the three jobs to settle")
    assert jobs["fine"]["status"] == "completed" and jobs["fine"]["result"] == {"n": 1, "attempt": 1}
    assert jobs["big"]["status"] == "failed" and jobs["big"]["retry_count"] == 0
    assert "result refused by the server: HTTP 422" in jobs["big"]["error"]
    assert jobs["odd"]["status"] == "failed" and jobs["odd"]["retry_count"] == 0
    assert "PermanentFailure: the handler's result is not JSON" in jobs["odd"]["error"]
    wait_until(lambda: finished(workers.output(proc), ids["odd"], "email"), 10, "the odd job's line")
    wait_until(lambda: finished(workers.output(proc), ids["big"], "email"), 10, "the big job's line")
    text = workers.output(proc)
    assert [o[1] for o in finished(text, ids["fine"], "email")] == ["completed"]
    assert [o[1] for o in finished(text, ids["big"], "email")] == ["permanent failure"]
    assert [o[1] for o in finished(text, ids["odd"], "email")] == ["permanent failure"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_debug_logs_each_claimed_job_once_those_a_report_claimed_too(app, keys, live_server, workers):
    """One job at a time: after the first claim, each completion claims the next job in its request
    (docs/worker.md); every job still has one DEBUG claim line."""
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    ids = [producer.post(f"{server.url}/jobs", json={"type": "email"}).json()["id"] for _ in range(6)]
    proc = workers.start(
        server.url, keys.raw("worker", "w-debug"), "--concurrency", "1", "--wait-seconds", "1"
    )

    def all_done() -> bool:
        return all(producer.get(f"{server.url}/jobs/{i}").json()["status"] == "completed" for i in ids)

    wait_until(all_done, 30, "every job to complete")
    wait_until(lambda: len(finished_lines(workers.output(proc))) == len(ids), 10, "each job's line")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    claim_lines = [
        message for level, message in records(workers.output(proc)) if message.startswith("claimed ")
    ]
    claimed = [int(i) for message in claim_lines for i in message.partition(": ")[2].split(", ")]
    assert sorted(claimed) == ids  # each job once, however it was claimed
    assert any("with a report" in message for message in claim_lines)  # the flow this test is about


def finished_lines(text: str) -> list[str]:
    return [message for _, message in records(text) if re.match(r"^job \d+ \(email\) completed", message)]
