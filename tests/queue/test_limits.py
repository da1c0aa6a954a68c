"""The queue layer's flow control settings (queuelog/queue/limits.py, docs/flow-control.md), on both engines:
what an admin may set, the period's default, the bucket's reset, the refusals, the audit row."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog
from queuelog.queue import Code, JobSpec
from queuelog.queue.errors import InvalidValues, JobTypeNotFound, each_refusal
from queuelog.queue.limits import period_text, rate_text, running_by_type

MOMENT = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def limits(q, name: str = "email") -> tuple:
    t = q.types.get(name)
    return (t.concurrency_limit, t.rate_limit, t.rate_period, t.rate_tokens, t.rate_checked_at)


def drain_bucket(q, name: str = "email") -> None:
    """Write the bucket's state as the claim does."""
    q.engine.update_job_type(name, {"rate_tokens": 2.5, "rate_checked_at": MOMENT})


def test_limits_are_set_kept_and_removed(q):
    assert limits(q) == (None, None, None, None, None)
    q.types.set_limits("email", "ada", concurrency_limit=5)
    assert limits(q) == (5, None, None, None, None)
    q.types.set_limits("email", "ada", rate_limit=100)  # no period: per minute
    assert limits(q) == (5, 100, 60, None, None)
    q.types.set_limits("email", "ada", rate_period=3600)
    assert limits(q) == (5, 100, 3600, None, None)
    q.types.set_limits("email", "ada", rate_limit=50)  # the period stays
    assert limits(q)[:3] == (5, 50, 3600)
    q.types.set_limits("email", "ada", rate_period=None)  # back to the default
    assert limits(q)[:3] == (5, 50, 60)
    q.types.set_limits("email", "ada", concurrency_limit=None, rate_limit=None)
    assert limits(q) == (None, None, None, None, None)
    q.types.set_limits("email", "ada", rate_period=30)  # a period without a rate limit is not kept
    assert limits(q) == (None, None, None, None, None)
    q.types.set_limits("email", "ada", concurrency_limit=10_000, rate_limit=1_000_000, rate_period=86_400)
    assert limits(q)[:3] == (10_000, 1_000_000, 86_400)
    q.types.set_limits("email", "ada", concurrency_limit=1, rate_limit=1, rate_period=1)
    assert limits(q)[:3] == (1, 1, 1)


def test_the_bucket_starts_full_again_when_the_rate_changes(q):
    q.types.set_limits("email", "ada", rate_limit=100, rate_period=60)
    drain_bucket(q)
    q.types.set_limits("email", "ada", concurrency_limit=3)  # not the rate: the bucket stays
    assert limits(q)[3:] == (2.5, MOMENT)
    q.types.set_limits("email", "ada", rate_limit=100, rate_period=60)  # the same rate: stays
    assert limits(q)[3:] == (2.5, MOMENT)
    q.types.change("email", "ada", description="mail", paused=True)
    assert limits(q)[3:] == (2.5, MOMENT)
    for change in ({"rate_limit": 200}, {"rate_period": 30}, {"rate_limit": None}):
        q.types.set_limits("email", "ada", rate_limit=100, rate_period=60)
        drain_bucket(q)
        q.types.set_limits("email", "ada", **change)
        assert limits(q)[3:] == (None, None), change


@pytest.mark.parametrize("value", [0, -1, 1.5, True, False, "2", 10_001, 2**70, [], {}])
def test_a_bad_concurrency_limit_is_refused_naming_the_field(q, value):
    q.types.set_limits("email", "ada", concurrency_limit=7)
    with pytest.raises(InvalidValues) as refused:
        q.types.set_limits("email", "ada", concurrency_limit=value)
    [refusal] = each_refusal(refused.value)
    assert refusal.field == "concurrency_limit"
    assert refusal.code is (Code.OUT_OF_RANGE if type(value) is int else Code.NOT_AN_INTEGER)
    assert (refusal.params["low"], refusal.params["high"]) == (1, 10_000)
    assert limits(q)[0] == 7  # nothing changed


def test_every_bad_field_is_refused_at_once_and_nothing_changes(q):
    with pytest.raises(InvalidValues) as refused:
        q.types.set_limits("email", "ada", concurrency_limit=3, rate_limit=1_000_001, rate_period=86_401)
    assert [(r.field, r.code, r.params["high"]) for r in each_refusal(refused.value)] == [
        ("rate_limit", Code.OUT_OF_RANGE, 1_000_000),
        ("rate_period", Code.OUT_OF_RANGE, 86_400),
    ]
    with pytest.raises(InvalidValues) as refused:
        q.types.set_limits("email", "ada", rate_limit=10, rate_period=0.5)
    assert [(r.field, r.code) for r in each_refusal(refused.value)] == [("rate_period", Code.NOT_AN_INTEGER)]
    assert limits(q) == (None, None, None, None, None)


def test_an_unknown_type_is_not_found(q):
    with pytest.raises(JobTypeNotFound) as missing:
        q.types.set_limits("nope", "ada", concurrency_limit=1)
    assert missing.value.code is Code.TYPE_NOT_FOUND and missing.value.params == {"name": "nope"}
    assert isinstance(missing.value, LookupError)  # as before the codes: the pages' 404
    with pytest.raises(LookupError):
        q.types.update("nope", paused=True)
    with pytest.raises(TypeError):
        q.types.set_limits("email", "ada", paused=True)  # not a limit


def test_each_change_is_audited_with_what_changed(q):
    q.types.set_limits("email", "ada", concurrency_limit=5, rate_limit=100)
    q.types.change("email", "bob", paused=True, rate_limit=None)
    with q.db.session() as session:
        rows = [
            (r.actor, r.action, r.target, r.detail)
            for r in session.scalars(select(AuditLog).where(AuditLog.action == "type.update"))
        ]
    assert rows == [
        ("ada", "type.update", "email",
         "concurrency_limit: none -> 5; rate_limit: none -> 100; rate_period: none -> 60"),
        ("bob", "type.update", "email", "paused: false -> true; rate_limit: 100 -> none; rate_period: 60 -> none"),
    ]  # fmt: skip


def test_running_jobs_are_counted_by_type(q):
    def job(kind: str) -> JobSpec:
        return JobSpec(type=kind, payload={}, payload_json=json.dumps({}))

    for kind in ("email", "email", "email", "pdf"):
        q.enqueue("alice", job(kind))
    assert running_by_type(q.engine) == {}
    q.claim("w", types=["email"], limit=2)
    q.claim("w", types=["pdf"])
    assert running_by_type(q.engine) == {"email": 2, "pdf": 1}


def test_periods_and_rates_are_written_as_the_command_line_takes_them(q):
    assert [period_text(s) for s in (1, 30, 60, 90, 300, 3600, 7200, 86_400, 61)] == [
        "s", "30s", "m", "90s", "5m", "h", "2h", "d", "61s"
    ]  # fmt: skip
    assert rate_text(q.types.get("email")) == "-"
    q.types.set_limits("email", "ada", rate_limit=10, rate_period=30)
    assert rate_text(q.types.get("email")) == "10/30s"
