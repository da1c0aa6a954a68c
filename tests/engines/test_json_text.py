"""Payloads and results come out of every engine read and write as the JSON text the database keeps
(``JobRecord``), never parsed on the way through; the job type schemas, which the ORM writes, still read as
canonical JSON. Run against each engine directly (no app)."""

from __future__ import annotations

import json

from queuelog.engines import Backoff
from tests.engines.conftest import NOW, new, set_type

ODD = {
    "text": 'ü 漢字 😀 \u2028 "q" \\ \t\n </script>',
    "键": {"ключ": ["</script>", ""]},
    "numbers": [0, -1, 3.25, 0.1, 12345678901234567890123, 1.5e-300, True, None],
    "nested": {"a": [{"b": [[{"c": {}}]]}]},
}


def test_every_job_record_carries_payload_and_result_as_stored_text(engine):
    [(job, _)] = engine.insert("alice", [new(payload=ODD)], NOW)
    claimed = engine.claim("w", now=NOW, lease_seconds=30, limit=1, types=None, backoff=Backoff(0, 0))
    [held] = claimed.jobs
    result = json.dumps(ODD, ensure_ascii=False, separators=(",", ":"))
    done = engine.complete(job.id, "w", held.lease_token, now=NOW, result_json=result)
    records = [job, held, done, engine.get(job.id), *engine.list_jobs()]
    for record in records:
        assert isinstance(record.payload, str) and json.loads(record.payload) == ODD
    assert isinstance(done.result, str) and json.loads(done.result) == ODD
    assert engine.get(job.id).result == done.result


def test_a_batch_completion_and_a_missing_result(engine):
    engine.insert("alice", [new(payload={"n": 1}), new(payload={"n": 2})], NOW)
    a, b = engine.claim("w", now=NOW, lease_seconds=30, limit=2, types=None, backoff=Backoff(0, 0)).jobs
    done = engine.complete_many(
        "w", [(a.id, a.lease_token, '{"r":"ü"}'), (b.id, b.lease_token, None)], now=NOW
    )
    assert [job.id for job in done] == [a.id, b.id]
    assert json.loads(done[0].result) == {"r": "ü"} and done[1].result is None


def test_job_type_schemas_still_read_as_canonical_json(db, engine):
    schema = {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}}
    set_type(db, "mail", schema=schema)
    [row] = [row for row in engine.job_types() if row.name == "mail"]
    assert json.loads(row.payload_schema) == schema
    assert row.payload_schema == json.dumps(schema, sort_keys=True) or db.dialect == "sqlite"


def test_a_batch_completion_keeps_odd_results_and_odd_tokens_apart(engine):
    """Every item arrives whole, whatever its characters: a token with array or JSON syntax in it is
    only a wrong token, and a result with quotes and backslashes is stored as it was sent."""
    engine.insert("alice", [new(payload={"n": n}) for n in range(4)], NOW)
    a, b, c, d = engine.claim("w", now=NOW, lease_seconds=30, limit=4, types=None, backoff=Backoff(0, 0)).jobs
    result = json.dumps(ODD, ensure_ascii=False, separators=(",", ":"))
    odd_tokens = ['x","' + b.lease_token, "NULL", '\\"},{' + c.lease_token]
    done = engine.complete_many(
        "w",
        [
            (a.id, a.lease_token, result),
            *((job.id, token, None) for job, token in zip((b, c, d), odd_tokens, strict=True)),
        ],
        now=NOW,
    )
    assert json.loads(done[0].result) == ODD and done[0].result == engine.get(a.id).result
    assert [type(outcome).__name__ for outcome in done[1:]] == ["Unchanged"] * 3
    assert [engine.get(job.id).status for job in (b, c, d)] == ["running"] * 3
    tricky = json.dumps({"p": '\\"},{', "q": "NULL"})  # results are objects (the API's contract)
    again = engine.complete_many("w", [(job.id, job.lease_token, tricky) for job in (b, c, d)], now=NOW)
    assert [json.loads(job.result) for job in again] == [{"p": '\\"},{', "q": "NULL"}] * 3
