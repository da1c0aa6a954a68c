"""The admin store (queuelog/queue/admin.py) and the admin changes of the queue layer, on both engines:
every change and its audit row are one transaction (a real constraint that refuses the audit row leaves
the change undone too); the API's key check builds nothing per request and reads the key every time, so a
revocation holds from the very next request; the faces hold no query of their own."""

from __future__ import annotations

import ast
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from queuelog.access.refusals import AlreadyExists
from queuelog.db import Database
from queuelog.queue.admin import AdminStore
from queuelog.queue.schedules import Schedules, ScheduleValues
from queuelog.queue.types import JobTypeRules

PACKAGE = Path(__file__).resolve().parents[2] / "queuelog"
# What a refused insert raises: SQLAlchemy's error on the ORM's paths, the driver's on the raw cursors.
REFUSED = (IntegrityError, sqlite3.IntegrityError, psycopg.errors.IntegrityError)


@contextmanager
def audit_refused(db: Database) -> Iterator[None]:
    """A real constraint of the database (a trigger) that refuses every new audit_log row while it is on."""
    if db.dialect == "sqlite":
        on = [
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'no audit'); END"
        ]
        off = ["DROP TRIGGER refuse_audit"]
    else:
        on = [
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'no audit' USING ERRCODE = 'check_violation'; END $$",
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
        ]
        off = ["DROP TRIGGER refuse_audit ON audit_log", "DROP FUNCTION refuse_audit()"]
    _run(db, on)
    try:
        yield
    finally:
        _run(db, off)  # PostgreSQL's test schema outlives the test


def _run(db: Database, statements: list[str]) -> None:
    with db.session(write=True) as session, session.begin():
        for statement in statements:
            session.execute(text(statement))


@dataclass
class Admin:
    """The app's admin faces' back end: the store, the job types, the schedules."""

    store: AdminStore
    types: JobTypeRules
    schedules: Schedules
    kept: dict[str, Any] = field(default_factory=dict)

    def audit(self) -> list[tuple[str, str, str]]:
        return [(row.actor, row.action, row.target) for row in reversed(self.store.audit_log(limit=10_000))]


@pytest.fixture
def admin(app) -> Admin:
    ext = app.extensions["queuelog"]
    return Admin(ext["admin"], ext["queue"].types, ext["schedules"])


def daily(name: str = "nightly", **kw: Any) -> ScheduleValues:
    return ScheduleValues(
        **({"name": name, "type": "email", "payload": {"to": "a@b.c"}, "cron": "0 3 * * *"} | kw)
    )


@dataclass(frozen=True)
class Change:
    """One admin change: what to make first, the change, and whether it is there to see."""

    action: str
    target: str
    change: Callable[[Admin], Any]
    happened: Callable[[Admin], bool]
    setup: Callable[[Admin], Any] = lambda a: None


def _carol(a: Admin) -> None:
    a.store.create_user("carol", "producer", "password-carol", actor="admin")


def _worker_key(a: Admin) -> None:
    a.kept["key"] = a.store.create_key("w-old", "worker", actor="admin")


def _type(a: Admin) -> None:
    a.types.create("report.build", "admin", "monthly reports")


def _schedule(a: Admin) -> None:
    a.schedules.add(daily(), "admin")


def _paused_schedule(a: Admin) -> None:
    _schedule(a)
    a.schedules.pause("nightly", "admin")


CHANGES = [
    Change(
        "user.create",
        "carol",
        lambda a: a.store.create_user("carol", "producer", "password-carol", actor="admin"),
        lambda a: a.store.user_named("carol") is not None,
    ),
    Change(
        "user.update",
        "carol",
        lambda a: a.store.update_user("carol", actor="admin", role="admin"),
        lambda a: a.store.user_named("carol").role == "admin",
        _carol,
    ),
    Change(
        "user.update",
        "carol",
        lambda a: a.store.update_user("carol", actor="admin", active=False),
        lambda a: not a.store.user_named("carol").active,
        _carol,
    ),
    Change(
        "user.update",
        "carol",
        lambda a: a.store.update_user("carol", actor="admin", password="a new password"),
        lambda a: a.store.login("carol", "a new password") is not None,
        _carol,
    ),
    Change(
        "key.create",
        "w-new",
        lambda a: a.store.create_key("w-new", "worker", actor="admin"),
        lambda a: any(key.name == "w-new" for key, _user in a.store.keys()),
    ),
    Change(
        "key.revoke",
        "w-old",
        lambda a: a.store.revoke_key("w-old", actor="admin"),
        lambda a: a.store.authenticate(a.kept["key"]) is None,
        _worker_key,
    ),
    Change(
        "type.create",
        "report.build",
        lambda a: a.types.create("report.build", "admin"),
        lambda a: "report.build" in [t.name for t in a.types.all()],
    ),
    Change(
        "type.update",
        "report.build",
        lambda a: a.types.change("report.build", "admin", description="yearly reports"),
        lambda a: a.types.get("report.build").description == "yearly reports",
        _type,
    ),
    Change(
        "type.pause",
        "report.build",
        lambda a: a.types.change("report.build", "admin", action="type.pause", paused=True),
        lambda a: a.types.get("report.build").paused,
        _type,
    ),
    Change(
        "schedule.create",
        "nightly",
        lambda a: a.schedules.add(daily(), "admin"),
        lambda a: [s.name for s in a.schedules.all()] == ["nightly"],
    ),
    Change(
        "schedule.update",
        "nightly",
        lambda a: a.schedules.update("nightly", daily(cron="0 4 * * *"), "admin"),
        lambda a: a.schedules.get("nightly").cron == "0 4 * * *",
        _schedule,
    ),
    Change(
        "schedule.pause",
        "nightly",
        lambda a: a.schedules.pause("nightly", "admin"),
        lambda a: a.schedules.get("nightly").paused,
        _schedule,
    ),
    Change(
        "schedule.resume",
        "nightly",
        lambda a: a.schedules.resume("nightly", "admin"),
        lambda a: not a.schedules.get("nightly").paused,
        _paused_schedule,
    ),
    Change(
        "schedule.delete",
        "nightly",
        lambda a: a.schedules.delete("nightly", "admin"),
        lambda a: a.schedules.all() == [],
        _schedule,
    ),
    Change(
        "schedule.run",
        "nightly",
        lambda a: a.schedules.run_now("nightly", "admin"),
        lambda a: len(a.schedules.queue.list_jobs(owner="schedule:nightly", limit=10)) == 1,
        _schedule,
    ),
]
IDS = [f"{c.action}-{i}" for i, c in enumerate(CHANGES)]


@pytest.mark.parametrize("case", CHANGES, ids=IDS)
def test_each_admin_change_writes_exactly_one_audit_row(admin, case):
    case.setup(admin)
    before = admin.audit()
    assert not case.happened(admin)
    case.change(admin)
    assert case.happened(admin)
    new = admin.audit()[len(before) :]
    assert [(action, target) for _actor, action, target in new] == [(case.action, case.target)]
    assert new[0][0] == "admin"


@pytest.mark.parametrize("case", CHANGES, ids=IDS)
def test_an_admin_change_whose_audit_row_is_refused_is_not_made(app, admin, case):
    case.setup(admin)
    before = admin.audit()
    with audit_refused(app.extensions["queuelog"]["db"]):
        with pytest.raises(REFUSED):
            case.change(admin)
    assert not case.happened(admin)  # the change went with its audit row
    assert admin.audit() == before
    case.change(admin)  # and nothing is left half-done: the change goes through once the row may be written
    assert case.happened(admin)


def test_a_refused_audit_row_is_not_mistaken_for_a_taken_name(app, admin):
    """The store tells "already exists" only when the name is taken: any other refusal of the
    transaction comes out as it is."""
    with audit_refused(app.extensions["queuelog"]["db"]):
        with pytest.raises(IntegrityError) as refused:
            admin.store.create_user("carol", "producer", "password-carol")
        assert not isinstance(refused.value, AlreadyExists)
        with pytest.raises(IntegrityError):
            admin.store.create_key("w-new", "worker")
    admin.store.create_user("carol", "producer", "password-carol")
    with pytest.raises(AlreadyExists):
        admin.store.create_user("carol", "producer", "password-carol")


# -- the API's key check ------------------------------------------------------------------------------


@contextmanager
def calls_of(*names: str) -> Iterator[Counter]:
    """Count the calls of Python functions named ``names`` made by this thread (the Flask test client
    serves requests in the caller's thread) while the block runs."""
    seen: Counter = Counter()

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code.co_name in names:
            seen[frame.f_code.co_name] += 1

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def test_api_key_checks_build_no_engine_per_request(app, client):
    store = app.extensions["queuelog"]["admin"]
    db = app.extensions["queuelog"]["db"]
    assert store.db is db and store.engine is app.extensions["queuelog"]["queue"].engine
    store.create_user("alice", "producer", "password-alice")
    headers = {"Authorization": "Bearer " + store.create_key("alice-laptop", "producer", username="alice")}
    with calls_of("create_engine", "engine_for") as control:  # the counter sees them when they happen
        other = Database(db.url.render_as_string(hide_password=False))
        AdminStore(other)
        other.dispose()
    assert control["create_engine"] >= 1 and control["engine_for"] == 1
    with calls_of("create_engine", "engine_for") as seen:
        for _ in range(50):
            assert client.get("/jobs?limit=1", headers=headers).status_code == 200
    assert seen == Counter()


def test_a_revoked_key_is_refused_on_the_very_next_request(app, client, database_url):
    store = app.extensions["queuelog"]["admin"]
    store.create_user("alice", "producer", "password-alice")
    keys = {name: store.create_key(name, "producer", username="alice") for name in ("one", "two", "three")}

    def status(name: str) -> int:
        return client.get("/jobs?limit=1", headers={"Authorization": f"Bearer {keys[name]}"}).status_code

    for _ in range(3):
        assert status("one") == 200
    store.revoke_key("one", actor="admin")
    assert status("one") == 401
    # A revocation made by another process (another Database on the same database) holds at its next
    # request on SQLite, and once its notification arrives on PostgreSQL, where a process remembers key
    # checks (docs/operations.md#api-keys-and-who-may-do-what).
    assert status("two") == 200
    elsewhere = Database(database_url)
    try:
        AdminStore(elsewhere).revoke_key("two", actor="admin")
    finally:
        elsewhere.dispose()
    if app.extensions["queuelog"]["db"].dialect == "sqlite":
        assert status("two") == 401
    else:
        deadline = time.monotonic() + 1.0
        while status("two") != 401:
            assert time.monotonic() < deadline, "still accepted a second after the revocation elsewhere"
            time.sleep(0.001)
    # So does the deactivation of the key's user.
    assert status("three") == 200
    store.update_user("alice", actor="admin", active=False)
    assert status("three") == 401
    store.update_user("alice", actor="admin", active=True)
    assert status("three") == 200


# -- the faces ----------------------------------------------------------------------------------------


def _face_modules() -> list[Path]:
    return sorted(
        [*(PACKAGE / "web").glob("*.py"), *(PACKAGE / "api").glob("*.py"), *PACKAGE.glob("cli*.py")]
    )


def test_the_faces_hold_no_query_of_their_own():
    """The pages, the JSON API and the command line reach users, keys, types, schedules and the audit log
    through the queue layer: none imports SQLAlchemy (but its exceptions) or opens a session."""
    found = []
    for path in _face_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                if node.module != "sqlalchemy.exc":
                    found.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.name}:{node.lineno} imports {a.name}"
                    for a in node.names
                    if a.name.startswith("sqlalchemy")
                ]
            elif isinstance(node, ast.Attribute) and node.attr in ("session", "scalars", "scalar"):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("flask", "request")):
                    found.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert len(_face_modules()) > 20  # the check reads the faces it means to
    assert found == []
