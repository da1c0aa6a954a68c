"""Adding and changing job types in the queue layer, on both engines: every face (the JSON API, the pages,
the command line) adds a type through ``Types.create``, which checks the name and the schema and writes
the type and its audit row in one transaction, or nothing."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog, JobType
from queuelog.queue import Code, JobSpec, JobValidationError, Queue
from queuelog.queue.types import SchemaFault, SchemaRefused


def audit_rows(q) -> list[tuple[str, str, str, str | None]]:
    with q.db.session() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.action.like("type.%")).order_by(AuditLog.id))
        return [(r.actor, r.action, r.target, r.detail) for r in rows]


def type_names(q) -> list[str]:
    with q.db.session() as session:
        return list(session.scalars(select(JobType.name).order_by(JobType.name)))


def test_create_adds_an_enabled_type_and_its_audit_row(q):
    job_type = q.types.create("invoice.monthly:v2", "ada", "Monthly invoice", {"type": "object"})
    assert (job_type.name, job_type.enabled, job_type.paused) == ("invoice.monthly:v2", True, False)
    assert q.types.get("invoice.monthly:v2").payload_schema == {"type": "object"}
    assert audit_rows(q) == [("ada", "type.create", "invoice.monthly:v2", None)]


@pytest.mark.parametrize("name", ["", "-dash", "x" * 65, "two\nlines", "report\n", "sp ace", "é", None])
def test_a_bad_name_is_refused_on_the_name_and_writes_nothing(q, name):
    before = type_names(q)
    with pytest.raises(JobValidationError) as refused:
        q.types.create(name, "ada")
    assert (refused.value.code, refused.value.field) == (Code.BAD_TYPE_NAME, "name")
    assert refused.value.params == {"max_length": 64}
    assert type_names(q) == before and audit_rows(q) == []


def test_a_taken_name_is_refused_and_writes_no_audit_row(q):
    q.types.create("report", "ada")
    with pytest.raises(JobValidationError) as refused:
        q.types.create("report", "bob", "another")
    assert (refused.value.code, refused.value.field, refused.value.params) == (
        Code.TYPE_EXISTS,
        "name",
        {"name": "report"},
    )
    assert q.types.get("report").description == ""
    assert audit_rows(q) == [("ada", "type.create", "report", None)]


@pytest.mark.parametrize(
    ("schema", "fault"),
    [
        ({"$ref": "https://example.com/s.json"}, SchemaFault.REMOTE_REF),
        ({"type": 5}, SchemaFault.INVALID),
        ([1, 2], SchemaFault.NOT_OBJECT),
    ],
)
def test_an_unusable_schema_is_refused_when_created_and_when_changed(q, schema, fault):
    with pytest.raises(SchemaRefused) as refused:
        q.types.create("report", "ada", "", schema)
    assert (refused.value.code, refused.value.field) == (fault, "payload_schema")
    assert "report" not in type_names(q)
    with pytest.raises(SchemaRefused):
        q.types.change("email", "ada", payload_schema=schema)
    assert q.types.get("email").payload_schema is None
    assert audit_rows(q) == []


def test_change_audits_under_the_action_it_is_given(q):
    q.types.change("email", "ada", action="type.pause", paused=True)
    q.types.change("email", "ada", action="type.resume", paused=False)
    q.types.change("email", "ada", description="Sends one email")
    assert audit_rows(q) == [
        ("ada", "type.pause", "email", "paused: false -> true"),
        ("ada", "type.resume", "email", "paused: true -> false"),
        ("ada", "type.update", "email", "description changed"),
    ]


@pytest.mark.parametrize(
    ("description", "code", "params"),
    [
        ("x" * 2001, Code.TOO_LONG, {"limit": 2000}),
        ("a\x00b", Code.NUL_CHARACTER, {}),
        ("a\udc80b", Code.LONE_SURROGATE, {}),
    ],
)
def test_a_description_is_checked_for_every_face(q, description, code, params):
    with pytest.raises(JobValidationError) as refused:
        q.types.create("report", "ada", description)
    assert (refused.value.code, refused.value.field, refused.value.params) == (code, "description", params)
    with pytest.raises(JobValidationError):
        q.types.change("email", "ada", description=description)
    assert "report" not in type_names(q) and q.types.get("email").description == ""
    assert audit_rows(q) == []
    assert q.types.create("report", "ada", "x" * 2000).description == "x" * 2000


@pytest.mark.slow  # waits out the other process's 2 seconds
def test_a_type_disabled_in_one_process_is_refused_by_the_others_within_two_seconds(q):
    """Each app process reads the allowlist at most every 2 seconds (docs/concepts.md): the process that
    made the change refuses at once, another one within 2 seconds of the change."""
    other = Queue(q.db)  # another app process: an allowlist read of its own
    spec = JobSpec(type="email", payload={}, payload_json="{}")
    other.enqueue("alice", spec)  # its allowlist is read now
    q.types.change("email", "ada", enabled=False)
    changed = time.monotonic()
    with pytest.raises(JobValidationError):
        q.enqueue("alice", spec)  # here, at once
    while True:
        try:
            other.enqueue("alice", spec)
        except JobValidationError as refused:
            assert refused.code == Code.UNKNOWN_TYPE
            break
        assert time.monotonic() - changed < 2.0 + 0.2, "still accepted 2 seconds after the change"
        time.sleep(0.05)
    assert time.monotonic() - changed <= 2.0 + 0.2
