"""The console's engine operations (search, count_matching, newest_id, bulk), run against each engine
directly (no app): the same answers on both, bounded windows, exact bulk counts, history and counters."""

from __future__ import annotations

import json

import pytest

from queuelog.engines import Backoff
from queuelog.engines.records import JobSearch
from tests.engines.conftest import NOW, count_jobs, later, new

FIXED = Backoff(10, 100, lambda: 0.5)


def ids(page):
    return [job.id for job in page.jobs]


@pytest.fixture
def jobs(engine):
    """Twelve jobs: alternating owners and types, payloads with nested fields, a few failed."""
    made = []
    for i in range(12):
        payload = {"to": f"user{i % 4}@example.com", "n": i, "flag": i % 2 == 0, "deep": {"k": f"v{i % 3}"}}
        at = later(i * 60)
        [(job, _)] = engine.insert(
            ("alice", "bob")[i % 2],
            [new(("email", "pdf")[i % 2], payload=payload, at=at, priority=(i % 3) * 10)],
            at,
        )
        made.append(job)
    # The others are cancelled; jobs 3 and 7 fail for good, each with its own error, held by "w".
    failing = {made[3].id: "SMTP said NO to ada", made[7].id: "TimeoutError after 30s"}
    for job in made:
        if job.id not in failing:
            engine.cancel(job.id, "t", now=NOW)
    at = later(3600)
    held = engine.claim("w", now=at, lease_seconds=30, limit=5, types=None, backoff=FIXED).jobs
    assert sorted(job.id for job in held) == sorted(failing)
    for job in held:
        engine.fail(
            job.id, "w", job.lease_token, now=at, error=failing[job.id], retryable=False, backoff=FIXED
        )
    return made


def test_search_by_indexed_and_scanned_fields(engine, jobs):
    everything = engine.search(JobSearch(), before_id=None, limit=100, scan=1000)
    assert ids(everything) == sorted((j.id for j in jobs), reverse=True) and everything.next_before is None
    cases = {
        JobSearch(owner="alice"): [j.id for j in jobs if j.owner == "alice"],
        JobSearch(type="pdf", owner="bob"): [j.id for j in jobs if j.type == "pdf"],
        JobSearch(priority=20): [j.id for j in jobs if j.priority == 20],
        JobSearch(id=jobs[5].id): [jobs[5].id],
        JobSearch(status="failed"): [jobs[3].id, jobs[7].id],
        JobSearch(worker="w"): [jobs[3].id, jobs[7].id],
        JobSearch(error="smtp said no"): [jobs[3].id],  # any ASCII case
        JobSearch(error="100%_"): [],  # no LIKE wildcards
        JobSearch(payload_path=("to",), payload_value="user1@example.com"): [
            jobs[1].id,
            jobs[5].id,
            jobs[9].id,
        ],
        JobSearch(payload_path=("n",), payload_value="4"): [jobs[4].id],
        JobSearch(payload_path=("flag",), payload_value="true"): [
            j.id for j in jobs if json.loads(j.payload)["flag"]
        ],
        JobSearch(payload_path=("deep", "k"), payload_value="v2"): [
            jobs[2].id,
            jobs[5].id,
            jobs[8].id,
            jobs[11].id,
        ],
        JobSearch(payload_path=("deep",), payload_value="v2"): [],  # an object is never equal to text
        JobSearch(payload_path=("to", "x"), payload_value="u"): [],  # a path through a string
        JobSearch(payload_path=('it\'s "odd"',), payload_value="x"): [],
        JobSearch(created_from=later(120), created_to=later(300)): [jobs[2].id, jobs[3].id, jobs[4].id],
        JobSearch(finished_from=later(3600), finished_to=later(3601), status="failed"): [
            jobs[3].id,
            jobs[7].id,
        ],
        JobSearch(finished_to=later(1)): [j.id for j in jobs if j.id not in (jobs[3].id, jobs[7].id)],
        JobSearch(owner="alice", error="SMTP"): [],  # job 3 is bob's
    }
    for search, expected in cases.items():
        page = engine.search(search, before_id=None, limit=100, scan=1000)
        assert ids(page) == sorted(expected, reverse=True), search
        assert page.next_before is None and not page.window_full, search


def test_search_pages_and_bounded_windows(engine, jobs):
    first = engine.search(JobSearch(owner="alice"), before_id=None, limit=2, scan=1000)
    assert ids(first) == [jobs[10].id, jobs[8].id] and first.next_before == jobs[8].id
    assert not first.window_full
    rest = engine.search(JobSearch(owner="alice"), before_id=first.next_before, limit=10, scan=1000)
    assert ids(rest) == [jobs[6].id, jobs[4].id, jobs[2].id, jobs[0].id] and rest.next_before is None
    # A scanned field examines at most `scan` candidates: 4 of alice's newest, then says where it stopped.
    rare = JobSearch(owner="alice", payload_path=("n",), payload_value="0")
    window = engine.search(rare, before_id=None, limit=10, scan=4)
    assert ids(window) == [] and window.window_full and window.next_before == jobs[4].id
    onward = engine.search(rare, before_id=window.next_before, limit=10, scan=4)
    assert ids(onward) == [jobs[0].id] and not onward.window_full and onward.next_before is None


def test_count_matching_counts_the_actions_statuses_up_to_the_ceiling_and_cap(engine, jobs):
    assert engine.newest_id() == jobs[-1].id
    everyone = JobSearch()
    assert engine.count_matching(everyone, action="retry", ceiling=jobs[-1].id, cap=100) == 12
    assert engine.count_matching(everyone, action="retry", ceiling=jobs[5].id, cap=100) == 6
    assert engine.count_matching(everyone, action="cancel", ceiling=jobs[-1].id, cap=100) == 0
    assert engine.count_matching(everyone, action="delete", ceiling=jobs[-1].id, cap=5) == 5
    assert engine.count_matching(JobSearch(error="timeout"), action="retry", ceiling=10**9, cap=100) == 1


def test_newest_id_of_an_empty_table(engine):
    assert engine.newest_id() == 0
    assert engine.search(JobSearch(worker="x"), before_id=None, limit=5, scan=5) == ([], None, False)


def test_bulk_actions_change_only_jobs_in_their_statuses_with_history_and_counts(db, engine):
    made = [engine.insert("alice", [new()], NOW)[0][0] for _ in range(5)]
    all_ids = [j.id for j in made]
    assert engine.bulk("retry", all_ids, "admin", now=later(1)) == []  # all pending: nothing to retry
    assert engine.bulk("delete", all_ids, "admin", now=later(1)) == []  # nor finished
    cancelled = engine.bulk("cancel", all_ids[:3] + [10**9], "admin", now=later(2))
    assert cancelled == all_ids[:3]
    assert [engine.get(i).status for i in all_ids] == ["cancelled"] * 3 + ["pending"] * 2
    assert [e[:3] for e in [(e.event, e.actor, e.attempt) for e in engine.events(all_ids[0])]] == [
        ("enqueued", "alice", 0),
        ("cancelled", "admin", 0),
    ]
    assert engine.bulk("cancel", all_ids, "admin", now=later(3)) == all_ids[3:]
    retried = engine.bulk("retry", all_ids[:2], "root", now=later(4))
    assert retried == all_ids[:2]
    job = engine.get(all_ids[0])
    assert (job.status, job.retry_count, job.available_at, job.finished_at) == ("pending", 0, later(4), None)
    assert [(e.event, e.actor) for e in engine.events(all_ids[0])][-1] == ("retried", "root")
    deleted = engine.bulk("delete", all_ids, "admin", now=later(5))
    assert deleted == all_ids[2:]
    assert [engine.get(i) is None for i in all_ids] == [False, False, True, True, True]
    assert engine.events(all_ids[2]) == []  # the history went with the job
    assert {k: n for k, n in count_jobs(db).items()} == {("pending", "email", 0): 2}
    counted = {(r.status, r.type, r.priority): r.n for r in engine.counts() if r.n}
    assert counted == count_jobs(db)


def test_bulk_counts_are_exact_in_large_batches(db, engine):
    made = engine.insert("bob", [new("pdf", priority=10) for _ in range(600)], NOW)
    job_ids = [job.id for job, _ in made]
    assert len(engine.bulk("cancel", job_ids, "admin", now=later(1))) == 600
    assert len(engine.bulk("retry", job_ids[::2], "admin", now=later(2))) == 300
    assert len(engine.bulk("delete", job_ids, "admin", now=later(3))) == 300
    assert count_jobs(db) == {("pending", "pdf", 10): 300}
    counted = {(r.status, r.type, r.priority): r.n for r in engine.counts() if r.n}
    assert counted == count_jobs(db)


def test_search_among_given_ids(engine, jobs):
    """``ids`` (an error group's jobs) limits a search and a count to those jobs; combined with other
    fields, all must match; an empty tuple matches nothing, None anything."""
    chosen = (jobs[3].id, jobs[4].id, jobs[7].id)
    page = engine.search(JobSearch(ids=chosen), before_id=None, limit=100, scan=1000)
    assert ids(page) == sorted(chosen, reverse=True)
    assert ids(
        engine.search(JobSearch(ids=chosen, status="failed"), before_id=None, limit=100, scan=1000)
    ) == [
        jobs[7].id,
        jobs[3].id,
    ]
    assert ids(engine.search(JobSearch(ids=()), before_id=None, limit=100, scan=1000)) == []
    assert len(ids(engine.search(JobSearch(ids=None), before_id=None, limit=100, scan=1000))) == len(jobs)
    ceiling = max(j.id for j in jobs)
    assert (
        engine.count_matching(JobSearch(ids=chosen), action="retry", ceiling=ceiling, cap=100) == 3
    )  # failed or cancelled
    assert engine.count_matching(JobSearch(ids=()), action="retry", ceiling=ceiling, cap=100) == 0


def test_a_bulk_change_and_its_audit_row_are_one_transaction(db, engine):
    """The audit row of a bulk action is written in the transaction of its changes: with the row refused
    by the database, nothing changes; with it, the row counts exactly the jobs changed (0 included)."""
    from sqlalchemy import select

    from queuelog.engines.records import BulkAudit
    from queuelog.models import AuditLog
    from tests.queue.test_admin import REFUSED, audit_refused

    made = [engine.insert("alice", [new()], NOW)[0][0].id for _ in range(3)]
    audit = BulkAudit("selected", "ids: " + " ".join(map(str, made)))
    with audit_refused(db), pytest.raises(REFUSED):
        engine.bulk("cancel", made, "admin", now=later(1), audit=audit)
    assert [engine.get(i).status for i in made] == ["pending"] * 3
    assert [e.event for e in engine.events(made[0])] == ["enqueued"]
    assert engine.bulk("cancel", made[:2], "admin", now=later(2), audit=audit) == made[:2]
    assert engine.bulk("retry", made[2:], "admin", now=later(3), audit=audit) == []
    with db.session() as session:
        rows = session.scalars(select(AuditLog).order_by(AuditLog.id)).all()
    assert [(r.actor, r.action, r.target, r.detail) for r in rows] == [
        ("admin", "jobs.bulk_cancel", "selected", f"{audit.detail}; jobs changed: 2"),
        ("admin", "jobs.bulk_retry", "selected", f"{audit.detail}; jobs changed: 0"),
    ]
