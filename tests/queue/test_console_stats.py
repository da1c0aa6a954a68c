"""The console's views (queuelog/queue/monitor.py) over a real database, with an injectable clock: workers
with what they hold and did in the last hour, and per-type figures with percentiles over hour and day."""

from __future__ import annotations

import json
from datetime import timedelta

from queuelog.queue import JobSpec, monitor
from queuelog.queue.admin import AdminStore
from queuelog.queue.monitor import ConsoleStats, percentile


def spec(job_type="email", max_retries=0):
    return JobSpec(type=job_type, payload={}, payload_json="{}", max_retries=max_retries)


def run(q, clock, worker, *, wait, run_for, fail=False, job_type="email"):
    """Enqueue a job, let it wait ``wait`` seconds, run it for ``run_for`` seconds, then report."""
    q.enqueue("alice", spec(job_type))
    clock.advance(wait)
    [job] = q.claim(worker, types=[job_type])
    clock.advance(run_for)
    if fail:
        return q.fail(job.id, worker, job.lease_token, "boom")
    return q.complete(job.id, worker, job.lease_token)


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (50.0, 95.0, 100.0)
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0


def test_type_figures_over_the_hour_and_the_day(q, clock):
    # Two hours ago: two slow email jobs; in the last hour: four fast ones, one of them failing.
    for _ in range(2):
        run(q, clock, "w-1", wait=60, run_for=30)
    clock.advance(7200)
    for i in range(4):
        run(q, clock, "w-1", wait=2, run_for=0.5, fail=i == 3)
    q.enqueue("alice", spec("pdf"))  # pending, never claimed
    figures = {t.name: t for t in ConsoleStats(q).types(now=clock.now)}
    assert set(figures) == {"email", "pdf", "sync"}  # the allowlist, used or not
    email = figures["email"]
    assert email.by_status == {
        "waiting": 0,
        "pending": 0,
        "running": 0,
        "completed": 5,
        "failed": 1,
        "cancelled": 0,
    }
    hour, day = email.windows["hour"], email.windows["day"]
    assert (hour.completed, hour.failed, hour.failure_rate) == (3, 1, 0.25)
    assert (hour.run_p50, hour.run_p95, hour.wait_p50, hour.wait_p95) == (0.5, 0.5, 2.0, 2.0)
    assert (day.completed, day.failed) == (5, 1)
    assert (day.run_p50, day.run_p95, day.wait_p50, day.wait_p95) == (0.5, 30.0, 2.0, 60.0)
    assert sum(h["completed"] for h in email.hourly) == 5 and email.hourly[-1]["failed"] == 1
    assert email.covers_since is None and email.sampled == 6
    pdf = figures["pdf"]
    assert pdf.by_status["pending"] == 1 and pdf.windows["day"].run_p50 is None
    assert pdf.windows["day"].failure_rate is None


def test_a_full_sample_says_what_it_covers(q, clock, monkeypatch):
    monkeypatch.setattr(monitor, "TYPE_SAMPLE", 3)
    for _ in range(5):
        run(q, clock, "w-1", wait=1, run_for=1)
        clock.advance(60)
    email = next(t for t in ConsoleStats(q).types(now=clock.now) if t.name == "email")
    assert email.sampled == 3 and email.windows["hour"].completed == 3
    assert email.covers_since == clock.now - timedelta(seconds=60 + 62 * 2)


def test_workers_hold_claim_report_and_fail(app, q, clock):
    db = app.extensions["queuelog"]["db"]
    for name in ("w-1", "w-2", "w-idle"):
        AdminStore(db).create_key(name, "worker")
    run(q, clock, "w-1", wait=1, run_for=1)
    run(q, clock, "w-1", wait=1, run_for=1, fail=True)
    clock.advance(7200)  # those two are older than an hour now
    run(q, clock, "w-1", wait=1, run_for=2)
    report = clock.now
    for _ in range(2):
        q.enqueue("alice", spec())
    clock.advance(5)
    held = q.claim("w-2", limit=2)
    claim_at = clock.now
    view = ConsoleStats(q).workers(now=clock.now)
    by_name = {w.name: w for w in view.workers}
    # keys never used are not "seen"; workers known from their jobs are listed all the same
    assert list(by_name) == ["w-2", "w-1"]
    w1, w2 = by_name["w-1"], by_name["w-2"]
    assert (w1.completed, w1.failed, w1.failure_rate, w1.last_report, w1.held_count) == (1, 0, 0.0, report, 0)
    assert (w2.held_count, [j.id for j in w2.held], w2.last_claim) == (
        2,
        sorted(j.id for j in held),
        claim_at,
    )
    assert all(j.lease_expires_at == claim_at + timedelta(seconds=30) for j in w2.held)
    assert w2.key is None and not w2.revocable
    assert (view.partial, view.since) == (False, clock.now - timedelta(hours=1))
    payload = json.dumps([w.name for w in view.workers])
    assert "w-idle" not in payload
