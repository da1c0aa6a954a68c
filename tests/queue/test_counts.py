"""The trigger-kept job_counts table always equals a count of the jobs table."""

from __future__ import annotations

import json
import random
from datetime import timedelta

from queuelog.queue import InvalidState, JobSpec, NotLeaseHolder


def counts_from_table(db) -> dict:
    with db.cursor() as cur:
        cur.execute(
            "SELECT owner, type, priority, status, sum(n) FROM job_counts GROUP BY owner, type, priority, status"
        )
        return {row[:4]: int(row[4]) for row in cur.fetchall() if row[4]}


def counts_from_jobs(db) -> dict:
    with db.cursor() as cur:
        cur.execute(
            "SELECT owner, type, priority, status, count(*) FROM jobs GROUP BY owner, type, priority, status"
        )
        return {row[:4]: int(row[4]) for row in cur.fetchall()}


def test_counts_follow_every_transition(app, queue):
    db = app.extensions["queuelog"]["db"]
    rng = random.Random(7)
    for step in range(300):
        action = rng.random()
        if action < 0.4:
            payload = {"s": step}
            spec = JobSpec(
                type=rng.choice(["email", "pdf"]),
                payload=payload,
                payload_json=json.dumps(payload),
                priority=rng.choice([0, 10, 20]),
                max_retries=rng.choice([0, 1]),
            )
            queue.enqueue(rng.choice(["alice", "bob"]), spec)
        elif action < 0.7:
            for job in queue.claim("w", limit=rng.randint(1, 3)):
                if rng.random() < 0.5:
                    queue.complete(job["id"], "w", job["lease_token"])
                else:
                    queue.fail(job["id"], "w", job["lease_token"], "boom", retryable=rng.random() < 0.5)
        elif action < 0.8:
            jobs = queue.list_jobs(status="pending", limit=5)
            if jobs:
                queue.cancel(jobs[0]["id"], "admin")
        elif action < 0.9:
            for job in queue.list_jobs(status="failed", limit=2) + queue.list_jobs(
                status="cancelled", limit=1
            ):
                try:
                    queue.retry(job["id"], "admin")
                except (InvalidState, NotLeaseHolder):
                    pass
        else:
            queue.prune(timedelta(0), batch=7)
    assert counts_from_jobs(db)  # the walk left jobs in several states
    assert counts_from_table(db) == counts_from_jobs(db)
