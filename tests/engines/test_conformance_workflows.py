"""Workflows on each engine (docs/workflows.md): dependencies, their release and cancellation, batches and
their callbacks. Every transition that finishes a job settles its dependents and its batch in the same
transaction; these tests check both directions (every dependent released, none twice) on both engines."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from queuelog.engines import Backoff, Unchanged
from queuelog.engines.records import (
    BatchConflict,
    Callback,
    DependencyMissing,
    KeyConflict,
    NewBatch,
)
from tests.engines.conftest import NOW, count_jobs, later, new

NO_WAIT = Backoff(0, 0)


def claim(engine, worker="w", *, at=NOW, lease=30, limit=1):
    return engine.claim(worker, now=at, lease_seconds=lease, limit=limit, types=None, backoff=NO_WAIT).jobs


def after(job, *ids, run=False, **kwargs):
    """``new`` with dependencies on ``ids`` (existing jobs)."""
    return new(**kwargs)._replace(depends_on=tuple(ids), on_dependency_failure="run" if run else None)


def history(engine, job_id):
    return [(e.event, e.actor) for e in engine.events(job_id)]


def finish(engine, job, how="complete", at=NOW):
    """Claim ``job`` (it must be the only claimable one) and finish it ``how``."""
    [held] = claim(engine, at=at)
    assert held.id == job.id
    if how == "complete":
        return engine.complete(held.id, "w", held.lease_token, now=at, result_json=None)
    return engine.fail(held.id, "w", held.lease_token, now=at, error="boom", retryable=False, backoff=NO_WAIT)


def ids(text):
    return json.loads(text) if text else []


def test_a_job_waits_for_its_dependencies_and_is_released_by_the_last(engine):
    [(a, _), (b, _)] = engine.insert("alice", [new(), new()], NOW)
    [(c, _)] = engine.insert("alice", [after(new(), a.id, b.id)], NOW)
    assert c.status == "waiting" and ids(c.depends_on) == [a.id, b.id] and ids(c.waiting_on) == [a.id, b.id]
    assert engine.get(a.id).dependents == 1
    held = claim(engine, limit=10)
    assert sorted(j.id for j in held) == [a.id, b.id]  # never the waiting job
    first = next(j for j in held if j.id == a.id)
    engine.complete(a.id, "w", first.lease_token, now=NOW, result_json=None)
    waiting = engine.get(c.id)
    assert waiting.status == "waiting" and ids(waiting.waiting_on) == [b.id]
    second = next(j for j in held if j.id == b.id)
    engine.complete(b.id, "w", second.lease_token, now=later(1), result_json=None)
    released = engine.get(c.id)
    assert (
        released.status == "pending" and ids(released.waiting_on) == [] and released.available_at == later(1)
    )
    assert history(engine, c.id) == [("enqueued", "alice"), ("released", "system")]
    [claimed] = claim(engine, at=later(1))
    assert claimed.id == c.id


def test_dependencies_already_finished_decide_the_starting_status(engine):
    [(a, _), (b, _)] = engine.insert("alice", [new(), new()], NOW)
    finish(engine, a)
    engine.cancel(b.id, "alice", now=NOW)
    [(ready, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    [(doomed, _)] = engine.insert("alice", [after(new(), a.id, b.id)], NOW)
    [(runs, _)] = engine.insert("alice", [after(new(), a.id, b.id, run=True)], NOW)
    assert (ready.status, doomed.status, runs.status) == ("pending", "cancelled", "pending")
    assert history(engine, doomed.id) == [("enqueued", "alice"), ("cancelled", f"job {b.id}")]


def test_an_unknown_or_unseen_dependency_is_refused_and_nothing_is_written(engine):
    [(mine, _)] = engine.insert("alice", [new()], NOW)
    [(theirs, _)] = engine.insert("bob", [new()], NOW)
    with pytest.raises(DependencyMissing) as refused:
        engine.insert("alice", [new(), after(new(), mine.id, theirs.id)], NOW, scope="alice")
    assert refused.value.missing == [(1, 1, theirs.id)]
    with pytest.raises(DependencyMissing) as refused:  # each missing one, in each job, in order
        engine.insert("alice", [after(new(), 999_999), new(), after(new(), mine.id, 999_998)], NOW)
    assert refused.value.missing == [(0, 0, 999_999), (2, 1, 999_998)]
    twice = after(new(), 999_997, 999_996, key="k")  # one key twice: the second is the first's replay
    with pytest.raises(DependencyMissing) as refused:
        engine.insert("alice", [new(), twice, twice, after(new(), mine.id, 999_993)], NOW)
    assert refused.value.missing == [(1, 0, 999_997), (1, 1, 999_996), (3, 1, 999_993)]
    assert engine.list_jobs(owner="alice") == [engine.get(mine.id)]
    assert engine.get(mine.id).dependents == 0
    # A replay keeps the dependencies its job had: only the new jobs' are read.
    engine.insert("alice", [after(new(), mine.id, key="r")], NOW)
    replay = after(new(), 999_995, key="r")  # the same fingerprint: the same job
    with pytest.raises(DependencyMissing) as refused:
        engine.insert("alice", [after(new(), 999_994), replay], NOW)
    assert refused.value.missing == [(0, 0, 999_994)]
    [(admins, _)] = engine.insert("root", [after(new(), theirs.id)], NOW)  # an admin: any job
    assert admins.status == "waiting"


def test_a_failed_dependency_cancels_its_dependents_transitively_in_one_transaction(engine):
    [(a, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    [(c, _)] = engine.insert("alice", [after(new(), b.id)], NOW)
    [(d, _)] = engine.insert("alice", [after(new(), c.id, run=True)], NOW)
    [(e, _)] = engine.insert("alice", [after(new(), d.id)], NOW)
    failed = finish(engine, a, "fail")
    assert failed.status == "failed"
    assert [engine.get(j.id).status for j in (b, c, d, e)] == ["cancelled", "cancelled", "pending", "waiting"]
    assert history(engine, b.id)[-1] == ("cancelled", f"job {a.id}")
    assert history(engine, c.id)[-1] == ("cancelled", f"job {b.id}")
    assert history(engine, d.id)[-1] == ("released", "system")
    assert engine.get(b.id).finished_at == NOW


def test_cancelling_a_waiting_job_cancels_its_own_dependents(engine):
    [(a, _)] = engine.insert("alice", [new()], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    [(c, _)] = engine.insert("alice", [after(new(), b.id)], NOW)
    cancelled = engine.cancel(b.id, "alice", now=NOW, owner="alice")
    assert cancelled.status == "cancelled" and ids(cancelled.waiting_on) == []
    assert engine.get(c.id).status == "cancelled"
    assert engine.get(a.id).status == "pending"


def test_lease_expiry_to_failed_cancels_dependents(engine):
    [(a, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    claim(engine, lease=5)
    expired = engine.expire(now=later(10), backoff=NO_WAIT)
    assert [j.status for j in expired] == ["failed"]
    assert engine.get(b.id).status == "cancelled"


def test_admin_retry_of_a_dependency_cancelled_job_waits_on_its_dependencies_again(engine):
    [(a, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    finish(engine, a, "fail")
    assert engine.retry(a.id, "root", now=NOW).status == "pending"
    again = engine.retry(b.id, "root", now=NOW)
    assert again.status == "waiting" and ids(again.waiting_on) == [a.id]
    finish(engine, a)
    assert engine.get(b.id).status == "pending"
    # a retried job whose dependencies all completed is pending at once
    [held] = claim(engine)
    engine.fail(held.id, "w", held.lease_token, now=NOW, error="x", retryable=False, backoff=NO_WAIT)
    assert engine.retry(b.id, "root", now=NOW).status == "pending"


def test_a_job_with_a_thousand_dependents_releases_them_all_once(engine):
    [(root, _)] = engine.insert("alice", [new()], NOW)
    engine.insert("alice", [after(new(), root.id) for _ in range(1000)], NOW)
    finish(engine, root)
    waiting = engine.list_jobs(owner="alice", status="waiting", limit=2000)
    pending = engine.list_jobs(owner="alice", status="pending", limit=2000)
    assert (len(waiting), len(pending)) == (0, 1000)
    released = [e for job in pending[:50] for e in history(engine, job.id) if e[0] == "released"]
    assert len(released) == 50


def test_concurrent_completions_of_every_dependency_release_the_dependent_exactly_once(engine):
    deps = [job for job, _ in engine.insert("alice", [new() for _ in range(8)], NOW)]
    [(joined, _)] = engine.insert("alice", [after(new(), *(d.id for d in deps))], NOW)
    held = claim(engine, limit=8)
    assert len(held) == 8
    barrier = threading.Barrier(8)

    def done(job):
        barrier.wait()
        return engine.complete(job.id, "w", job.lease_token, now=NOW, result_json=None)

    with ThreadPoolExecutor(8) as pool:
        assert all(j.status == "completed" for j in pool.map(done, held))
    assert engine.get(joined.id).status == "pending"
    assert [e for e in history(engine, joined.id) if e[0] == "released"] == [("released", "system")]


# -- batches -----------------------------------------------------------------------------------------------


def callback(type="email", **payload):
    return Callback(type, json.dumps(payload), 0, 3)


def make_batch(engine, jobs, *, owner="alice", success=None, finish=None, key=None, fingerprint=None):
    batch = NewBatch("nightly", jobs, success, finish, key, fingerprint)
    return engine.create_batch(owner, batch, now=NOW)


def test_a_batch_is_made_all_at_once_with_refs_and_counts(engine):
    jobs = [new(), new()._replace(after=(0,)), new()._replace(after=(0, 1))]
    batch, created = make_batch(engine, jobs, success=callback(step="ok"), finish=callback(step="end"))
    assert created and batch.status == "running" and batch.total == 3 and len(batch.jobs) == 3
    first, second, third = (engine.get(i) for i in batch.jobs)
    assert (first.status, second.status, third.status) == ("pending", "waiting", "waiting")
    assert ids(third.depends_on) == [first.id, second.id] and {j.batch_id for j in (first, second)} == {
        batch.id
    }
    assert batch.counts["pending"] == 1 and batch.counts["waiting"] == 2
    assert engine.get_batch(batch.id) == batch


def test_a_batch_finishes_with_its_last_member_and_enqueues_callbacks_once(engine):
    batch, _ = make_batch(engine, [new(), new()], success=callback(step="ok"), finish=callback(step="end"))
    held = claim(engine, limit=2)
    engine.complete(held[0].id, "w", held[0].lease_token, now=NOW, result_json=None)
    assert engine.get_batch(batch.id).status == "running"
    engine.complete(held[1].id, "w", held[1].lease_token, now=later(1), result_json=None)
    done = engine.get_batch(batch.id)
    assert done.status == "succeeded" and done.finished_at == later(1)
    success, end = engine.get(done.on_success_job), engine.get(done.on_finish_job)
    assert json.loads(success.payload) == {"step": "ok"} and json.loads(end.payload) == {"step": "end"}
    assert success.status == end.status == "pending" and success.callback_of == batch.id
    assert success.batch_id == batch.id and done.jobs == tuple(j.id for j in held)
    assert len(engine.list_jobs(owner="alice", limit=50)) == 4


def test_a_batch_with_failures_enqueues_on_finish_only_and_retry_never_enqueues_again(engine):
    batch, _ = make_batch(engine, [new(max_retries=0), new()], success=callback(), finish=callback())
    held = claim(engine, limit=2)
    engine.fail(held[0].id, "w", held[0].lease_token, now=NOW, error="x", retryable=False, backoff=NO_WAIT)
    engine.complete(held[1].id, "w", held[1].lease_token, now=NOW, result_json=None)
    done = engine.get_batch(batch.id)
    assert done.status == "finished_with_failures" and done.on_success_job is None
    finish_job = done.on_finish_job
    assert finish_job is not None
    again = engine.retry_batch(batch.id, "root", now=NOW)
    assert again.status == "running" and again.finished_at is None and again.counts["pending"] == 1
    [member] = [j for j in claim(engine, limit=5) if j.batch_id == batch.id and j.callback_of is None]
    engine.complete(member.id, "w", member.lease_token, now=NOW, result_json=None)
    final = engine.get_batch(batch.id)
    assert final.status == "succeeded" and final.on_finish_job == finish_job
    assert final.on_success_job is not None  # first success: on_success now, once
    callbacks = [j for j in engine.list_jobs(owner="alice", limit=50) if j.callback_of == batch.id]
    assert len(callbacks) == 2


def test_batch_cancel_cancels_pending_and_waiting_and_asks_running_to_stop(engine):
    batch, _ = make_batch(engine, [new(), new(), new()._replace(after=(1,))], finish=callback())
    [running] = claim(engine)
    out = engine.cancel_batch(batch.id, "alice", now=NOW, owner="alice")
    assert out.counts["cancelled"] == 2 and out.counts["running"] == 1 and out.status == "running"
    assert engine.get(running.id).cancel_requested
    assert engine.cancel_batch(batch.id, "bob", now=NOW, owner="bob") is None
    engine.cancel_held(running.id, "w", running.lease_token, now=NOW)
    final = engine.get_batch(batch.id)
    assert final.status == "finished_with_failures" and final.on_finish_job is not None


def test_batch_idempotency_replays_or_conflicts(engine):
    first, created = make_batch(engine, [new()], key="k", fingerprint="f1")
    again, created_again = make_batch(engine, [new()], key="k", fingerprint="f1")
    assert created and not created_again and again.id == first.id
    with pytest.raises(BatchConflict):
        make_batch(engine, [new()], key="k", fingerprint="f2")
    assert len(engine.list_batches(owner="alice")) == 1


def test_batches_are_listed_newest_first_by_owner_and_status(engine):
    a, _ = make_batch(engine, [new()])
    b, _ = make_batch(engine, [new()], owner="bob")
    c, _ = make_batch(engine, [new()])
    assert [x.id for x in engine.list_batches()] == [c.id, b.id, a.id]
    assert [x.id for x in engine.list_batches(owner="alice", limit=1)] == [c.id]
    assert [x.id for x in engine.list_batches(owner="alice", before_id=c.id)] == [a.id]
    assert engine.list_batches(status="succeeded") == []


def test_a_worker_holding_a_running_member_adds_jobs_and_the_batch_waits_for_them(engine):
    batch, _ = make_batch(engine, [new()], finish=callback())
    [held] = claim(engine)
    assert engine.add_to_batch(batch.id, "other", held.lease_token, [new()], now=NOW) == "not_holder"
    assert engine.add_to_batch(batch.id, "w", "stale", [new()], now=NOW) == "not_holder"
    added = engine.add_to_batch(batch.id, "w", held.lease_token, [new(), new()._replace(after=(0,))], now=NOW)
    assert [j.batch_id for j in added] == [batch.id, batch.id] and added[1].status == "waiting"
    assert added[0].owner == "alice"
    engine.complete(held.id, "w", held.lease_token, now=NOW, result_json=None)
    assert engine.get_batch(batch.id).status == "running" and engine.get_batch(batch.id).total == 3
    for _ in range(2):
        [member] = claim(engine)
        engine.complete(member.id, "w", member.lease_token, now=NOW, result_json=None)
    assert engine.get_batch(batch.id).status == "succeeded"
    assert engine.add_to_batch(batch.id, "w", held.lease_token, [new()], now=NOW) == "not_holder"


def test_the_last_two_members_finishing_at_once_enqueue_callbacks_exactly_once(engine):
    for _ in range(3):
        batch, _ = make_batch(engine, [new() for _ in range(8)], success=callback(), finish=callback())
        held = claim(engine, limit=8)
        barrier = threading.Barrier(8)

        def done(job, barrier=barrier):
            barrier.wait()
            return engine.complete(job.id, "w", job.lease_token, now=NOW, result_json=None)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(done, held))
        final = engine.get_batch(batch.id)
        assert final.status == "succeeded" and final.counts["completed"] == 8
        callbacks = [j for j in engine.list_jobs(owner="alice", limit=500) if j.callback_of == batch.id]
        assert sorted(j.id for j in callbacks) == sorted([final.on_success_job, final.on_finish_job])
        for _ in callbacks:  # drain them, so the next round claims only members
            [c] = claim(engine)
            engine.complete(c.id, "w", c.lease_token, now=NOW, result_json=None)


def test_bulk_actions_settle_dependents_and_batches(engine):
    batch, _ = make_batch(engine, [new(), new()._replace(after=(0,))], finish=callback())
    first, second = batch.jobs
    assert engine.bulk("cancel", [first], "root", now=NOW) == [first]
    assert engine.get(second).status == "cancelled"
    assert engine.get_batch(batch.id).status == "finished_with_failures"
    assert sorted(engine.bulk("retry", [first, second], "root", now=NOW)) == [first, second]
    assert (engine.get(first).status, engine.get(second).status) == ("pending", "waiting")
    assert engine.get_batch(batch.id).status == "running"
    assert engine.dependents(first) == [second]


def test_plain_jobs_show_no_dependencies_and_take_no_workflow_path(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    assert (job.depends_on, job.waiting_on, job.batch_id, job.dependents, job.in_workflow) == (
        None,
        None,
        None,
        0,
        False,
    )
    done = finish(engine, job)
    assert not isinstance(done, Unchanged) and done.status == "completed"


def test_a_dependent_is_released_once_whichever_way_its_dependencies_finish(engine):
    """Four dependencies end four ways (completed, lease expired out of retries, cancelled, failed then
    retried by an admin and completed): the job that runs whatever their outcome is released exactly once,
    by the last, and never before."""
    deps = [job for job, _ in engine.insert("alice", [new(max_retries=0) for _ in range(4)], NOW)]
    [(joined, _)] = engine.insert("alice", [after(new(), *(d.id for d in deps), run=True)], NOW)
    ordered = sorted(claim(engine, limit=3, lease=5), key=lambda j: j.id)
    engine.complete(ordered[0].id, "w", ordered[0].lease_token, now=NOW, result_json=None)
    engine.fail(
        ordered[2].id, "w", ordered[2].lease_token, now=NOW, error="x", retryable=False, backoff=NO_WAIT
    )
    assert engine.get(joined.id).status == "waiting"
    engine.expire(now=later(10), backoff=NO_WAIT)  # deps[1]: out of retries, failed
    assert engine.get(joined.id).status == "waiting"
    engine.retry(deps[2].id, "root", now=later(10))  # failed -> pending again: it must be waited for
    assert ids(engine.get(joined.id).waiting_on) == [deps[2].id, deps[3].id]
    engine.cancel(deps[3].id, "alice", now=later(10))
    assert engine.get(joined.id).status == "waiting"
    [again] = claim(engine, at=later(11))
    assert again.id == deps[2].id
    engine.complete(again.id, "w", again.lease_token, now=later(11), result_json=None)
    assert engine.get(joined.id).status == "pending"
    assert [e for e in history(engine, joined.id) if e[0] == "released"] == [("released", "system")]


def test_pruning_a_finished_job_deletes_its_dependency_rows(engine):
    [(a, _)] = engine.insert("alice", [new()], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    finish(engine, a)
    finish(engine, b)
    assert engine.dependents(a.id) == [b.id]
    assert engine.prune(finished_before=later(1), batch=10, throughput_before=NOW) == 2
    assert engine.dependents(a.id) == []


def test_complete_many_completes_members_dependents_and_plain_jobs_alike(engine):
    batch, _ = make_batch(engine, [new()], finish=callback())
    [(root, _), (plain, _)] = engine.insert("alice", [new(), new()], NOW)
    [(waits, _)] = engine.insert("alice", [after(new(), root.id)], NOW)
    held = claim(engine, limit=3)
    items = [(j.id, j.lease_token, None) for j in held]
    assert all(j.status == "completed" for j in engine.complete_many("w", items, now=NOW))
    assert engine.get(waits.id).status == "pending" and engine.get_batch(batch.id).status == "succeeded"
    [again] = claim(engine, limit=1)  # the dependent (lower id than the callback): a job with a dependency
    [done] = engine.complete_many("w", [(again.id, again.lease_token, None)], now=NOW)
    assert done.status == "completed" and plain.id in [j.id for j in held]


def test_complete_each_settles_workflows_as_complete_many_does(engine):
    batch, _ = make_batch(engine, [new()], finish=callback())
    [(root, _), (plain, _)] = engine.insert("alice", [new(), new()], NOW)
    [(waits, _)] = engine.insert("alice", [after(new(), root.id)], NOW)
    held = claim(engine, limit=3)
    answers = engine.complete_each("w", [(j.id, j.lease_token, None) for j in held], now=NOW)
    assert {tuple(answer) for answer in answers} == {(j.id, "completed", j.id != plain.id) for j in held}
    assert engine.get(waits.id).status == "pending" and engine.get_batch(batch.id).status == "succeeded"
    assert history(engine, waits.id)[-1][0] == "released"


@pytest.mark.parametrize("how", ["complete", "fail", "complete_many", "complete_each"])
def test_a_report_repeated_for_a_job_in_a_workflow_answers_as_the_first_and_settles_once(engine, how):
    """A complete (alone or in a batch) or fail sent again with its lease token (its answer was lost: docs/operations.md#outages)
    answers the job as the first did, also for a job with dependents, whose first report settled them:
    the dependent is released (or cancelled) once, and the repeat writes nothing."""
    [(a, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    [(b, _)] = engine.insert("alice", [after(new(), a.id)], NOW)
    [held] = claim(engine)

    def report():
        if how == "complete":
            return engine.complete(a.id, "w", held.lease_token, now=later(1), result_json=None)
        if how in ("complete_many", "complete_each"):
            [job] = getattr(engine, how)("w", [(a.id, held.lease_token, None)], now=later(1))
            return job
        return engine.fail(
            a.id, "w", held.lease_token, now=later(1), error="boom", retryable=False, backoff=NO_WAIT
        )

    first, again = report(), report()
    assert not isinstance(first, Unchanged) and not isinstance(again, Unchanged)
    assert again.status == first.status == ("failed" if how == "fail" else "completed")
    expected = ("cancelled", f"job {a.id}") if how == "fail" else ("released", "system")
    assert history(engine, b.id) == [("enqueued", "alice"), expected]
    assert [e for e, _ in history(engine, a.id)].count(first.status) == 1
    stranger = engine.complete(a.id, "w2", held.lease_token, now=later(2), result_json=None)
    assert isinstance(stranger, Unchanged)  # another worker's repeat is refused as before


def test_a_thousand_chained_jobs_in_one_batch_are_written_whole(engine, db):
    chain = [new(payload={"n": i}, priority=i % 3)._replace(after=(i - 1,) if i else ()) for i in range(1000)]
    batch, created = make_batch(engine, chain)
    assert (
        created and batch.total == 1000 and len(batch.jobs) == 1000 and list(batch.jobs) == sorted(batch.jobs)
    )
    assert batch.counts["pending"] == 1 and batch.counts["waiting"] == 999
    jobs = [engine.get(i) for i in batch.jobs]
    assert [json.loads(j.payload)["n"] for j in jobs] == list(range(1000))
    assert [j.status for j in jobs] == ["pending"] + ["waiting"] * 999
    for before, job in zip(jobs, jobs[1:], strict=False):
        assert ids(job.depends_on) == ids(job.waiting_on) == [before.id]
        assert engine.dependents(before.id) == [job.id] and before.dependents == 1
    assert jobs[0].depends_on is None and jobs[-1].dependents == 0
    assert {history(engine, j.id)[0] for j in jobs} == {("enqueued", "alice")}
    assert all(len(engine.events(j.id)) == 1 for j in (jobs[0], jobs[500], jobs[-1]))
    counted = {(c.status, c.type, c.priority): c.n for c in engine.counts() if c.n}
    assert counted == count_jobs(db)
    assert engine.claimable(now=NOW)
    finish(engine, jobs[0])
    assert engine.get(jobs[1].id).status == "pending" and engine.get(jobs[2].id).status == "waiting"


def test_an_insert_mixes_replays_refs_and_finished_dependencies(engine):
    [(kept, _), (done, _), (gone, _)] = engine.insert("alice", [new(key="k1"), new(), new()], NOW)
    finish(engine, kept)
    engine.cancel(gone.id, "alice", now=NOW)
    jobs = [
        new(key="k1"),  # a replay: the job the key names, not a new one
        new()._replace(after=(0,)),  # after the replayed job, which is completed
        after(new(), done.id, key="k2"),
        after(new(), gone.id)._replace(after=(2,)),  # a cancelled dependency: cancelled too
        after(new(), gone.id, run=True),  # ... unless it runs whatever the outcome
        new()._replace(after=(3,)),  # after a job this insert cancels
    ]
    out = engine.insert("alice", jobs, NOW, scope="alice")
    assert [created for _, created in out] == [False, True, True, True, True, True]
    replay, ready, waits, doomed, runs, follows = (job for job, _ in out)
    assert replay.id == kept.id and ready.status == "pending" and ids(ready.depends_on) == [kept.id]
    assert waits.status == "waiting" and ids(waits.waiting_on) == [done.id]
    assert (
        doomed.status == "cancelled"
        and doomed.finished_at == NOW
        and ids(doomed.depends_on) == sorted([gone.id, waits.id])
    )
    assert history(engine, doomed.id) == [("enqueued", "alice"), ("cancelled", f"job {gone.id}")]
    assert runs.status == "pending" and follows.status == "cancelled"
    assert history(engine, follows.id) == [("enqueued", "alice"), ("cancelled", f"job {doomed.id}")]
    assert (engine.get(kept.id).dependents, engine.get(done.id).dependents) == (1, 1)
    assert (engine.get(gone.id).dependents, engine.get(waits.id).dependents) == (2, 1)
    assert engine.dependents(gone.id) == [doomed.id, runs.id]
    again = engine.insert("alice", jobs[:3], NOW, scope="alice")  # the keyed ones replay, the other is new
    assert [(job.id, created) for job, created in again][::2] == [(kept.id, False), (waits.id, False)]
    assert again[1][1] and again[1][0].status == "pending" and engine.get(kept.id).dependents == 2


def test_a_key_used_twice_in_one_insert_or_changed_is_a_replay_or_a_conflict(engine):
    [(first, made), (second, again)] = engine.insert("alice", [new(key="d"), new(key="d")], NOW)
    assert made and not again and first.id == second.id
    with pytest.raises(KeyConflict) as refused:
        engine.insert("alice", [new(), new(key="d", payload={"other": 1})._replace(after=(0,))], NOW)
    assert refused.value.index == 1 and refused.value.job.id == first.id
    assert [j.id for j in engine.list_jobs(owner="alice")] == [first.id]
