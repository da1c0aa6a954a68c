"""The engines' operations on running jobs (``Engine`` in queuelog/engines/engine.py; docs/running-jobs.md): asking to
cancel one, the worker carrying it out, a lease that expires meanwhile, progress reports and snoozes. Run
against each engine directly, with exact times; both must behave alike."""

from __future__ import annotations

from queuelog.engines import Backoff, Unchanged
from tests.engines.conftest import NOW, count_jobs, later, new
from tests.engines.test_conformance import FIXED, NO_WAIT, claim, history


def held_job(engine, worker="w1", *, lease=30, max_retries=3, owner="alice"):
    engine.insert(owner, [new(max_retries=max_retries)], NOW)
    return claim(engine, worker, lease=lease).jobs[0]


def test_a_cancel_request_is_recorded_once_on_a_running_job_only(engine):
    held = held_job(engine)
    [(pending, _)] = engine.insert("alice", [new()], NOW)
    asked = engine.request_cancel(held.id, "admin", now=later(5))
    assert (asked.status, asked.cancel_requested, asked.cancel_requested_at, asked.cancel_requested_by) == (
        "running",
        True,
        later(5),
        "admin",
    )
    assert asked.lease_token == held.lease_token and asked.updated_at == later(5)
    assert engine.request_cancel(held.id, "bob", now=later(6)) == Unchanged(asked)  # asked already
    assert engine.request_cancel(pending.id, "admin", now=later(6)) == Unchanged(engine.get(pending.id))
    assert engine.request_cancel(999, "admin", now=later(6)) == Unchanged(None)
    assert history(engine, held.id) == [
        ("enqueued", "alice", 0),
        ("claimed", "w1", 1),
        ("cancel_requested", "admin", 1),
    ]


def test_an_owner_may_ask_only_for_their_own_jobs(engine):
    held = held_job(engine, owner="bob")
    assert engine.request_cancel(held.id, "alice", now=later(1), owner="alice") == Unchanged(held)
    asked = engine.request_cancel(held.id, "bob", now=later(1), owner="bob")
    assert asked.cancel_requested_by == "bob"


def test_the_holder_stops_a_job_whose_cancellation_was_requested(db, engine):
    held = held_job(engine)
    token = held.lease_token
    assert engine.cancel_held(held.id, "w1", token, now=later(1)) == Unchanged(held)  # nobody asked
    asked = engine.request_cancel(held.id, "admin", now=later(2))
    assert engine.cancel_held(held.id, "w2", token, now=later(3)) == Unchanged(asked)
    assert engine.cancel_held(held.id, "w1", "0" * 32, now=later(3)) == Unchanged(asked)
    stopped = engine.cancel_held(held.id, "w1", token, now=later(4))
    assert (stopped.status, stopped.finished_at, stopped.lease_token, stopped.lease_expires_at) == (
        "cancelled",
        later(4),
        None,
        None,
    )
    assert not stopped.cancel_requested and stopped.cancel_requested_by is None
    assert stopped.retry_count == 0 and stopped.error is None
    # a late report of the old holder is refused like any fenced one
    assert engine.complete(held.id, "w1", token, now=later(5), result_json=None) == Unchanged(stopped)
    assert engine.heartbeat(held.id, "w1", token, now=later(5), lease_seconds=30) == Unchanged(stopped)
    assert history(engine, held.id)[-2:] == [("cancel_requested", "admin", 1), ("cancelled", "w1", 1)]
    assert count_jobs(db) == {("cancelled", "email", 0): 1}
    assert [(c.status, c.n) for c in engine.counts() if c.n] == [("cancelled", 1)]


def test_a_failure_of_a_job_asked_to_cancel_ends_it_cancelled_in_the_fail_itself(db, engine):
    held = held_job(engine)
    plain = held_job(engine, "w2")
    engine.request_cancel(held.id, "admin", now=later(1))
    stopped = engine.fail(
        held.id, "w1", held.lease_token, now=later(2), error="Traceback: boom", retryable=True, backoff=FIXED
    )
    assert (stopped.status, stopped.error, stopped.retry_count, stopped.finished_at) == (
        "cancelled",
        "Traceback: boom",
        0,  # not counted as a failed attempt: it is not retried
        later(2),
    )
    assert (stopped.lease_token, stopped.cancel_requested_at, stopped.cancel_requested_by) == (
        None,
        None,
        None,
    )
    assert [(e.event, e.actor, e.attempt, e.error) for e in engine.events(held.id)][-1] == (
        "cancelled",
        "w1",
        1,
        "Traceback: boom",
    )
    # the same statement fails a job nobody asked to cancel as before: retried after its backoff
    retried = engine.fail(
        plain.id, "w2", plain.lease_token, now=later(2), error="x", retryable=True, backoff=FIXED
    )
    assert (retried.status, retried.retry_count, retried.finished_at) == ("pending", 1, None)
    assert history(engine, plain.id)[-1] == ("retry_scheduled", "w2", 1)
    assert count_jobs(db) == {("cancelled", "email", 0): 1, ("pending", "email", 0): 1}


def test_a_requested_job_whose_lease_expires_ends_cancelled_not_retried(engine):
    asked = held_job(engine, lease=30)
    other = held_job(engine, "w2", lease=30)
    engine.request_cancel(asked.id, "admin", now=later(1))
    settled = claim(engine, "w3", at=later(31), backoff=NO_WAIT)
    assert [j.id for j in settled.expired] == [other.id]  # retried as usual, and handed out again
    assert [j.id for j in settled.jobs] == [other.id]
    ended = engine.get(asked.id)
    assert (ended.status, ended.finished_at, ended.retry_count, ended.lease_token) == (
        "cancelled",
        later(31),
        0,
        None,
    )
    assert not ended.cancel_requested
    assert history(engine, asked.id)[-1] == ("cancelled", "system", 1)


def test_expire_settles_requested_jobs_as_cancelled_too(engine):
    held = held_job(engine, lease=30, max_retries=0)
    engine.request_cancel(held.id, "alice", now=later(1))
    assert engine.expire(now=later(30), backoff=FIXED) == [] and engine.get(held.id).status == "running"
    assert engine.expire(now=later(31), backoff=FIXED) == []  # not an expired failure: cancelled
    assert engine.get(held.id).status == "cancelled"
    assert history(engine, held.id)[-1] == ("cancelled", "system", 1)


def test_progress_is_a_fenced_heartbeat_of_the_running_attempt(engine):
    held = held_job(engine, lease=30)
    token = held.lease_token
    assert engine.get(held.id).progress is None
    beat = engine.report_progress(
        held.id, "w1", token, now=later(10), lease_seconds=60, percent=40, message="page 4 of 10"
    )
    assert (beat.progress, beat.progress_message, beat.progress_updated_at) == (40, "page 4 of 10", later(10))
    assert beat.lease_expires_at == later(70) and engine.get(held.id) == beat
    for worker, wrong in (("w2", token), ("w1", "0" * 32)):
        outcome = engine.report_progress(
            held.id, worker, wrong, now=later(11), lease_seconds=60, percent=90, message=None
        )
        assert outcome == Unchanged(beat)
    only_note = engine.report_progress(
        held.id, "w1", token, now=later(12), lease_seconds=60, percent=None, message="waiting for the API"
    )
    assert (only_note.progress, only_note.progress_message) == (None, "waiting for the API")
    assert history(engine, held.id) == [("enqueued", "alice", 0), ("claimed", "w1", 1)]  # no history rows


def test_progress_of_an_earlier_attempt_is_not_shown(engine):
    held = held_job(engine, lease=30)
    engine.report_progress(
        held.id, "w1", held.lease_token, now=later(1), lease_seconds=30, percent=80, message="x"
    )
    retrying = engine.fail(
        held.id, "w1", held.lease_token, now=later(2), error="boom", retryable=True, backoff=NO_WAIT
    )
    assert retrying.status == "pending" and retrying.progress is None
    again = claim(engine, "w2", at=later(3)).jobs[0]
    assert (again.progress, again.progress_message, again.progress_updated_at) == (None, None, None)
    assert again.progress_percent == 80  # stored, but from the attempt before


def test_a_snooze_hands_the_job_back_without_counting_a_failure(engine):
    held = held_job(engine, lease=30)
    token = held.lease_token
    later_on = engine.snooze(held.id, "w1", token, now=later(5), delay_seconds=120, max_snoozes=3)
    assert (later_on.status, later_on.available_at, later_on.retry_count, later_on.snooze_count) == (
        "pending",
        later(125),
        0,
        1,
    )
    assert (later_on.lease_token, later_on.lease_expires_at, later_on.finished_at) == (None, None, None)
    assert later_on.worker_id == "w1"
    assert engine.snooze(held.id, "w1", token, now=later(6), delay_seconds=1, max_snoozes=3) == Unchanged(
        later_on
    )
    assert claim(engine, "w2", at=later(124)).jobs == []
    again = claim(engine, "w2", at=later(125)).jobs[0]
    assert (again.id, again.retry_count, again.snooze_count) == (held.id, 0, 1)
    assert history(engine, held.id) == [
        ("enqueued", "alice", 0),
        ("claimed", "w1", 1),
        ("snoozed", "w1", 1),
        ("claimed", "w2", 1),
    ]


def test_snoozes_are_fenced_and_capped(engine):
    held = held_job(engine)
    assert engine.snooze(
        held.id, "w2", held.lease_token, now=NOW, delay_seconds=1, max_snoozes=2
    ) == Unchanged(held)
    job = held
    for at in (0, 1):
        engine.snooze(job.id, "w1", job.lease_token, now=later(at), delay_seconds=1, max_snoozes=2)
        job = claim(engine, "w1", at=later(at + 1)).jobs[0]
    at = 2
    refused = engine.snooze(job.id, "w1", job.lease_token, now=later(at), delay_seconds=1, max_snoozes=2)
    assert refused == Unchanged(job) and job.snooze_count == 2  # still held: complete or fail it
    done = engine.complete(job.id, "w1", job.lease_token, now=later(at), result_json=None)
    assert done.status == "completed"


def test_an_admins_retry_keeps_the_snooze_count_and_its_cap(engine):
    """The cap counts a job's whole life (docs/running-jobs.md): a retry gives it no new snoozes."""
    job = held_job(engine)
    engine.snooze(job.id, "w1", job.lease_token, now=NOW, delay_seconds=1, max_snoozes=1)
    job = claim(engine, "w1", at=later(1)).jobs[0]
    failed = engine.fail(
        job.id, "w1", job.lease_token, now=later(1), error="boom", retryable=False, backoff=Backoff(0, 0)
    )
    assert failed.status == "failed" and failed.snooze_count == 1
    retried = engine.retry(job.id, "admin", now=later(2))
    assert retried.status == "pending" and retried.retry_count == 0 and retried.snooze_count == 1
    job = claim(engine, "w1", at=later(2)).jobs[0]
    refused = engine.snooze(job.id, "w1", job.lease_token, now=later(2), delay_seconds=1, max_snoozes=1)
    assert refused == Unchanged(job)  # at the cap still
    allowed = engine.snooze(job.id, "w1", job.lease_token, now=later(2), delay_seconds=1, max_snoozes=2)
    assert allowed.status == "pending" and allowed.snooze_count == 2  # under a higher cap it may


def test_a_snooze_after_a_cancel_request_ends_the_job_cancelled(engine):
    held = held_job(engine)
    engine.request_cancel(held.id, "admin", now=later(1))
    ended = engine.snooze(held.id, "w1", held.lease_token, now=later(2), delay_seconds=60, max_snoozes=0)
    assert (ended.status, ended.finished_at, ended.snooze_count, ended.available_at) == (
        "cancelled",
        later(2),
        0,
        held.available_at,
    )
    assert not ended.cancel_requested
    assert history(engine, held.id)[-2:] == [("cancel_requested", "admin", 1), ("cancelled", "w1", 1)]
