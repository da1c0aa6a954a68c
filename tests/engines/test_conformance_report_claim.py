"""``complete_and_claim`` and ``fail_and_claim``: a report and the next claim in one transaction, on each
engine (docs/api.md#report-and-claim-in-one-request)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from queuelog.engines import Backoff, Unchanged
from tests.engines.conftest import NOW, later, new, set_type
from tests.engines.test_conformance import FIXED, NO_WAIT, claim, history


def complete_next(engine, job, *, worker="w", at=NOW, limit=1, types=None, result='{"ok": true}'):
    return engine.complete_and_claim(
        job.id,
        worker,
        job.lease_token,
        now=at,
        result_json=result,
        lease_seconds=30,
        limit=limit,
        types=types,
        backoff=FIXED,
    )


def fail_next(engine, job, *, worker="w", at=NOW, retryable=True, backoff=FIXED, limit=1):
    return engine.fail_and_claim(
        job.id,
        worker,
        job.lease_token,
        now=at,
        error="boom",
        retryable=retryable,
        lease_seconds=30,
        limit=limit,
        types=None,
        backoff=backoff,
    )


def test_complete_and_claim_completes_then_claims_in_claim_order(engine):
    engine.insert("alice", [new(priority=0), new(priority=5), new(type="sms", priority=9)], NOW)
    [first] = claim(engine).jobs
    done, claimed = complete_next(engine, first, at=later(1), limit=2)
    assert not isinstance(done, Unchanged)
    assert (done.id, done.status, done.result) == (first.id, "completed", '{"ok": true}')
    assert [(j.priority, j.status, j.worker_id) for j in claimed.jobs] == [
        (5, "running", "w"),
        (0, "running", "w"),
    ]
    assert all(j.lease_token and j.lease_expires_at == later(31) for j in claimed.jobs)
    assert claimed.expired == []
    assert history(engine, first.id) == [("enqueued", "alice", 0), ("claimed", "w", 1), ("completed", "w", 1)]
    for job in claimed.jobs:
        assert history(engine, job.id) == [("enqueued", "alice", 0), ("claimed", "w", 1)]


def test_complete_and_claim_honours_types_and_answers_none_when_nothing_is_claimable(engine):
    engine.insert("alice", [new(type="sms", priority=9), new(type="email")], NOW)
    [sms] = claim(engine).jobs
    done, claimed = complete_next(engine, sms, types=["sms"])
    assert done.status == "completed" and claimed.jobs == []
    [email] = claim(engine).jobs
    assert email.type == "email"
    done, claimed = complete_next(engine, email, types=["email", "sms"], limit=5)
    assert done.status == "completed" and claimed.jobs == []


def test_a_refused_report_claims_nothing_and_changes_nothing(engine):
    engine.insert("alice", [new(), new()], NOW)
    [held] = claim(engine).jobs
    wrong = held._replace(lease_token="0" * 32)
    done, claimed = complete_next(engine, wrong)
    assert isinstance(done, Unchanged) and done.job.status == "running" and claimed.jobs == []
    done, claimed = fail_next(engine, wrong)
    assert isinstance(done, Unchanged) and done.job.status == "running" and claimed.jobs == []
    other = engine.get(held.id + 1)
    assert other.status == "pending" and history(engine, other.id) == [("enqueued", "alice", 0)]
    assert history(engine, held.id) == [("enqueued", "alice", 0), ("claimed", "w", 1)]
    missing = held._replace(id=held.id + 100)
    done, claimed = complete_next(engine, missing)
    assert isinstance(done, Unchanged) and done.job is None and claimed.jobs == []
    assert engine.get(other.id).status == "pending"
    # Another worker cannot report the job either, whatever it asks next.
    done, claimed = complete_next(engine, held, worker="intruder")
    assert isinstance(done, Unchanged) and claimed.jobs == [] and engine.get(other.id).status == "pending"


def test_fail_and_claim_retries_later_and_claims_another(engine):
    engine.insert("alice", [new(priority=5), new(priority=0)], NOW)
    [first] = claim(engine).jobs
    failed, claimed = fail_next(engine, first)
    assert (failed.status, failed.retry_count, failed.error) == ("pending", 1, "boom")
    assert failed.available_at == later(7.5)  # FIXED: 10 * 0.75
    [second] = claimed.jobs
    assert second.id != first.id and second.status == "running"
    assert history(engine, first.id)[-1] == ("retry_scheduled", "w", 1)


def test_fail_and_claim_may_hand_the_failed_job_out_again_at_once(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    [held] = claim(engine).jobs
    failed, claimed = fail_next(engine, held, backoff=NO_WAIT)
    assert failed.status == "pending"
    [again] = claimed.jobs
    assert again.id == job.id and again.retry_count == 1 and again.lease_token != held.lease_token
    failed, claimed = fail_next(engine, again, retryable=False)
    assert failed.status == "failed" and claimed.jobs == []


def test_the_claim_settles_expired_leases_first(engine):
    engine.insert("alice", [new(), new()], NOW)
    [a] = claim(engine, worker="gone", lease=10).jobs
    [b] = claim(engine, worker="w", lease=100).jobs
    done, claimed = complete_next(engine, b, at=later(20), limit=5)
    assert done.status == "completed"
    assert [j.id for j in claimed.expired] == [a.id]
    assert claimed.expired[0].status == "pending"


def test_many_threads_complete_and_claim_each_job_exactly_once(engine):
    total, threads = 120, 6
    engine.insert("alice", [new(payload={"n": n}) for n in range(total)], NOW)
    start = threading.Barrier(threads)

    def work(index):
        worker = f"w{index}"
        start.wait()
        done = []
        jobs = claim(engine, worker=worker, backoff=Backoff(0, 0)).jobs
        while jobs:
            job = jobs[0]
            finished, claimed = complete_next(engine, job, worker=worker)
            assert not isinstance(finished, Unchanged)
            done.append(finished.id)
            jobs = claimed.jobs
        return done

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(work, range(threads)))
    completed = [job_id for done in results for job_id in done]
    assert len(completed) == total and len(set(completed)) == total
    jobs = engine.list_jobs(limit=total + 1)
    assert len(jobs) == total and {j.status for j in jobs} == {"completed"}
    for job in jobs:  # one claim and one completion each: never handed out twice
        events = [event for event, _, _ in history(engine, job.id)]
        assert events == ["enqueued", "claimed", "completed"]


def test_the_slot_a_report_frees_under_a_concurrency_limit_goes_to_its_claim(db, engine):
    set_type(db, "email", concurrency=1)
    engine.insert("alice", [new(), new(), new()], NOW)
    [held] = claim(engine).jobs
    assert claim(engine, worker="other").jobs == []  # the one slot is taken
    done, claimed = complete_next(engine, held, limit=3)
    assert done.status == "completed"
    [following] = claimed.jobs  # the freed slot, and no more
    failed, claimed = fail_next(engine, following, retryable=False, limit=3)
    assert failed.status == "failed" and len(claimed.jobs) == 1


def test_a_report_and_claim_of_a_job_in_a_workflow_settles_its_dependents_and_claims_them(engine):
    """Completing (or failing) a job that others wait for releases (or cancels) them in the report's
    transaction, as ``complete`` does (docs/workflows.md); the claim that follows may take the released
    job at once. A report repeated with its token answers the job and claims again."""
    [(a, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    [(b, _)] = engine.insert("alice", [new()._replace(depends_on=(a.id,))], NOW)
    assert b.status == "waiting"
    [held] = claim(engine, at=NOW).jobs
    done, claimed = complete_next(engine, held, at=later(1))
    assert done.status == "completed" and [j.id for j in claimed.jobs] == [b.id]
    assert [e[0] for e in history(engine, b.id)][:3] == ["enqueued", "released", "claimed"]
    again, more = complete_next(engine, held, at=later(2))
    assert not isinstance(again, Unchanged) and again.status == "completed" and more.jobs == []
    [(c, _)] = engine.insert("alice", [new(max_retries=0)], later(3))
    [(d, _)] = engine.insert("alice", [new()._replace(depends_on=(c.id,))], later(3))
    [held_c] = [j for j in claim(engine, at=later(4)).jobs]
    assert held_c.id == c.id
    failed, none = fail_next(engine, held_c, at=later(5), retryable=False)
    assert failed.status == "failed" and none.jobs == []
    assert engine.get(d.id).status == "cancelled"


# -- a batch completion and the next claim: complete_each_and_claim ------------------------------------


def complete_each_next(engine, jobs, *, worker="w", at=NOW, limit=1, types=None, tokens=None):
    items = [
        (job.id, token, None)
        for job, token in zip(jobs, tokens or [j.lease_token for j in jobs], strict=True)
    ]
    return engine.complete_each_and_claim(
        worker, items, now=at, lease_seconds=30, limit=limit, types=types, backoff=FIXED
    )


def test_complete_each_and_claim_completes_each_then_claims_in_claim_order(engine):
    engine.insert("alice", [new(priority=p) for p in (9, 8, 0, 5, 1)], NOW)
    held = claim(engine, limit=2).jobs
    answers, claimed = complete_each_next(engine, held, at=later(1), limit=2)
    assert [(a.id, a.status, a.in_workflow) for a in answers] == [(j.id, "completed", False) for j in held]
    assert [(j.priority, j.status, j.worker_id) for j in claimed.jobs] == [
        (5, "running", "w"),
        (1, "running", "w"),
    ]
    assert all(j.lease_token and j.lease_expires_at == later(31) for j in claimed.jobs)
    for job in held:
        assert engine.get(job.id).status == "completed"
        assert history(engine, job.id) == [
            ("enqueued", "alice", 0),
            ("claimed", "w", 1),
            ("completed", "w", 1),
        ]
    for job in claimed.jobs:
        assert history(engine, job.id) == [("enqueued", "alice", 0), ("claimed", "w", 1)]
    # The last job: nothing left to claim, an empty claim.
    [last] = claim(engine).jobs
    answers, claimed = complete_each_next(engine, [last, *claimed.jobs], at=later(2), limit=5)
    assert [a.status for a in answers] == ["completed"] * 3 and claimed.jobs == []


def test_complete_each_and_claim_claims_whatever_each_items_outcome(engine):
    """Each item stands alone: refused ones answer Unchanged and change nothing, a repeated report
    answers the job as it stands, and the claim happens all the same."""
    engine.insert("alice", [new(), new(), new(), new()], NOW)
    a, b = claim(engine, limit=2).jobs
    [done] = engine.complete_each("w", [(a.id, a.lease_token, None)], now=later(1))
    assert done.status == "completed"
    answers, claimed = complete_each_next(
        engine, [a, b, b._replace(id=b.id + 100)], tokens=[a.lease_token, "0" * 32, "1" * 32], limit=2
    )
    repeated, wrong, missing = answers
    assert not isinstance(repeated, Unchanged) and (repeated.id, repeated.status) == (a.id, "completed")
    assert isinstance(wrong, Unchanged) and wrong.job.status == "running"
    assert isinstance(missing, Unchanged) and missing.job is None
    assert len(claimed.jobs) == 2 and {j.id for j in claimed.jobs}.isdisjoint({a.id, b.id})
    assert history(engine, b.id) == [("enqueued", "alice", 0), ("claimed", "w", 1)]
    # All refused: the claim happens all the same (the intruder's slots are free), and takes no job twice.
    [(e, _)] = engine.insert("alice", [new()], NOW)
    answers, more = complete_each_next(engine, [b], worker="intruder", limit=5)
    assert isinstance(answers[0], Unchanged) and [j.id for j in more.jobs] == [e.id]
    assert engine.get(b.id).worker_id == "w"


def test_complete_each_and_claim_takes_the_slots_its_completions_freed(db, engine):
    set_type(db, "email", concurrency=2)
    engine.insert("alice", [new() for _ in range(5)], NOW)
    held = claim(engine, limit=5).jobs
    assert len(held) == 2 and claim(engine, worker="other").jobs == []  # both slots taken
    answers, claimed = complete_each_next(engine, held, limit=5)
    assert [a.status for a in answers] == ["completed", "completed"]
    assert len(claimed.jobs) == 2  # the two freed slots, and no more


def test_complete_each_and_claim_of_a_job_in_a_workflow_releases_its_dependents(engine):
    """Its dependent is released by the batch (in the claim's transaction on SQLite, just after it on
    PostgreSQL): claimed by this call, or by the next claim."""
    [(a, _)] = engine.insert("alice", [new()], NOW)
    [(b, _)] = engine.insert("alice", [new()._replace(depends_on=(a.id,))], NOW)
    [held] = claim(engine).jobs
    [answer], claimed = complete_each_next(engine, [held], at=later(1), limit=5)
    assert (answer.id, answer.status, answer.in_workflow) == (a.id, "completed", True)
    taken = [j.id for j in claimed.jobs] or [j.id for j in claim(engine, at=later(2)).jobs]
    assert taken == [b.id]
    assert [e[0] for e in history(engine, b.id)][:3] == ["enqueued", "released", "claimed"]


def test_complete_each_and_claim_completes_an_item_past_its_lease_rather_than_settle_it(engine):
    """A job whose lease ended but that nobody claimed since is still its holder's to complete, as a
    completion alone does: the claim's settling of expired leases passes over the reported jobs, a plain
    job and a job in a workflow alike, and hands none of them out again."""
    [(a, _)] = engine.insert("alice", [new()], NOW)
    [(flow, _)] = engine.insert("alice", [new()], NOW)
    [(after, _)] = engine.insert("alice", [new()._replace(depends_on=(flow.id,))], NOW)
    held = claim(engine, lease=10, limit=2).jobs
    assert {j.id for j in held} == {a.id, flow.id}
    answers, claimed = complete_each_next(engine, held, at=later(20), limit=5)
    assert [(x.status, x.in_workflow) for x in answers] == [("completed", job.id == flow.id) for job in held]
    for job in held:
        assert history(engine, job.id) == [
            ("enqueued", "alice", 0),
            ("claimed", "w", 1),
            ("completed", "w", 1),
        ]
    assert claimed.expired == [] and {j.id for j in claimed.jobs} <= {after.id}
    taken = [j.id for j in claimed.jobs] or [j.id for j in claim(engine, at=later(21)).jobs]
    assert taken == [after.id]  # released by its dependency's completion


def test_many_threads_complete_batches_and_claim_the_next_each_job_exactly_once(engine):
    total, threads = 300, 6
    engine.insert("alice", [new(payload={"n": n}) for n in range(total)], NOW)
    start = threading.Barrier(threads)

    def work(index):
        worker = f"w{index}"
        start.wait()
        done = []
        jobs = claim(engine, worker=worker, limit=7).jobs
        while jobs:
            answers, claimed = complete_each_next(engine, jobs, worker=worker, limit=7)
            assert all(not isinstance(a, Unchanged) and a.status == "completed" for a in answers)
            done += [a.id for a in answers]
            jobs = claimed.jobs
        return done

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(work, range(threads)))
    completed = [job_id for done in results for job_id in done]
    assert len(completed) == total and len(set(completed)) == total
    assert sum(1 for done in results if done) > 1, "the work was shared"
    jobs = engine.list_jobs(limit=total + 1)
    assert len(jobs) == total and {j.status for j in jobs} == {"completed"}
    for job in jobs:  # one claim and one completion each: never handed out twice
        assert [event for event, _, _ in history(engine, job.id)] == ["enqueued", "claimed", "completed"]


# -- a report and its claim sent again with the claim's request id ----------------------------------


def test_a_batch_completion_sent_again_with_its_request_id_answers_the_same_claim(engine):
    """The answer to a batch completion that claimed next was lost; sent again with the same request id,
    its completions answer as the first did and its claim answers the jobs the first one leased: none is
    left held by nobody, none leased twice. Another id claims anew."""
    engine.insert("alice", [new() for _ in range(6)], NOW)
    held = claim(engine, limit=2).jobs
    items = [(j.id, j.lease_token, None) for j in held]

    def send(request_id, at):
        return engine.complete_each_and_claim(
            "w", items, now=at, lease_seconds=30, limit=2, types=None, backoff=FIXED, request_id=request_id
        )

    answers, first = send("r-1", later(1))
    again_answers, again = send("r-1", later(2))
    assert [a.status for a in answers] == [a.status for a in again_answers] == ["completed", "completed"]
    assert len(first.jobs) == 2
    assert [(j.id, j.lease_token) for j in again.jobs] == [(j.id, j.lease_token) for j in first.jobs]
    for job in first.jobs:
        assert [e[0] for e in history(engine, job.id)] == ["enqueued", "claimed"]  # leased once
    _, other = send("r-2", later(3))
    assert len(other.jobs) == 2 and {j.id for j in other.jobs}.isdisjoint({j.id for j in first.jobs})


def test_a_report_sent_again_with_its_request_id_answers_the_same_claim(engine):
    engine.insert("alice", [new() for _ in range(5)], NOW)
    a, b = claim(engine, limit=2).jobs

    def complete_again(request_id):
        return engine.complete_and_claim(
            a.id,
            "w",
            a.lease_token,
            now=later(1),
            result_json=None,
            lease_seconds=30,
            limit=1,
            types=None,
            backoff=FIXED,
            request_id=request_id,
        )

    def fail_again(request_id):
        return engine.fail_and_claim(
            b.id,
            "w",
            b.lease_token,
            now=later(1),
            error="boom",
            retryable=False,
            lease_seconds=30,
            limit=1,
            types=None,
            backoff=FIXED,
            request_id=request_id,
        )

    for send, status in ((complete_again, "completed"), (fail_again, "failed")):
        done, first = send(f"r-{status}")
        repeated, again = send(f"r-{status}")
        assert done.status == repeated.status == status
        [job] = first.jobs
        assert [(j.id, j.lease_token) for j in again.jobs] == [(job.id, job.lease_token)]
        assert [e[0] for e in history(engine, job.id)] == ["enqueued", "claimed"]
    assert [engine.get(i).status for i in range(a.id, a.id + 5)].count("pending") == 1


def test_a_claim_in_two_steps_under_a_limit_is_answered_whole_when_sent_again(db, engine):
    """Under a concurrency limit PostgreSQL's claim may come in two steps (the statement's snapshot cannot
    see the slots its completions freed): both steps' jobs are the request's, answered again whole."""
    set_type(db, "email", concurrency=3)
    engine.insert("alice", [new() for _ in range(8)], NOW)
    held = claim(engine, limit=2).jobs
    items = [(j.id, j.lease_token, None) for j in held]

    def send():
        return engine.complete_each_and_claim(
            "w", items, now=later(1), lease_seconds=30, limit=5, types=None, backoff=FIXED, request_id="r"
        )

    answers, first = send()
    assert [a.status for a in answers] == ["completed", "completed"] and len(first.jobs) == 3  # the room
    _, again = send()
    assert sorted((j.id, j.lease_token) for j in again.jobs) == sorted(
        (j.id, j.lease_token) for j in first.jobs
    )
    assert claim(engine, worker="other").jobs == []  # the three slots are the request's
