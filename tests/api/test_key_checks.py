"""The API key check of every request (queuelog/queue/admin.py, docs/operations.md#api-keys-and-who-may-do-what):
remembered on PostgreSQL while the process's listener hears that no key or user changed, read every time
otherwise; a key's last use written to the minute, in one statement per process."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import event, text, update

from queuelog.db import Database
from queuelog.models import ApiKey, utcnow
from queuelog.queue import wakeups as wakeups_module
from queuelog.queue.admin import AdminStore


class KeyStatements:
    """The app's key checks that read the key (the engine's ``api_key``, counted and passed on) and every
    statement that writes ``api_keys`` (seen on the real engine)."""

    def __init__(self, app):
        self.db: Database = app.extensions["queuelog"]["db"]
        self.store: AdminStore = app.extensions["queuelog"]["admin"]
        self.read = 0
        self.statements: list[str] = []
        api_key = self.store.engine.api_key

        def counted(digest):
            self.read += 1
            return api_key(digest)

        self.store.engine.api_key = counted  # type: ignore[method-assign]
        event.listen(self.db.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("UPDATE API_KEYS"):
            self.statements.append(statement)

    def reads(self) -> int:
        return self.read

    def writes(self) -> int:
        return len(self.statements)

    def clear(self) -> None:
        self.read = 0
        self.statements.clear()

    def close(self) -> None:
        event.remove(self.db.engine, "before_cursor_execute", self._seen)


# Tests of what only PostgreSQL does run on it alone (the backend fixture's parameter, set here).
postgresql_only = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


@pytest.fixture
def db(app) -> Database:
    return app.extensions["queuelog"]["db"]


@pytest.fixture
def seen(app):
    counter = KeyStatements(app)
    yield counter
    counter.close()


def wait_listening(hub) -> None:
    deadline = time.monotonic() + 10
    while not hub.listening:
        assert time.monotonic() < deadline, "the listener never connected"
        time.sleep(0.01)


@pytest.fixture
def listening(app):
    """The app's process listening for notifications (PostgreSQL; its first API request starts it)."""
    hub = app.extensions["queuelog"]["queue"].wakeups
    hub.keys_generation()
    wait_listening(hub)
    return hub


def remembered(ask, seen) -> None:
    """The key check of ``ask()`` (a request) is remembered: it reads nothing (so that what follows can
    fail)."""
    assert ask().status_code < 300
    seen.clear()
    assert ask().status_code < 300
    assert seen.reads() == 0
    seen.clear()


def elsewhere(database_url: str) -> tuple[Database, AdminStore]:
    """Another process's view of the database (the command line, another server): its own pool, no
    listener."""
    other = Database(database_url)
    return other, AdminStore(other)


def answered_within(ask, status: int, seconds: float) -> float:
    """Seconds until ``ask()`` answers ``status``, asking every millisecond."""
    started = time.monotonic()
    while ask().status_code != status:
        assert time.monotonic() - started < seconds, f"not {status} after {seconds} s"
        time.sleep(0.001)
    return time.monotonic() - started


def claim(caller):
    return caller.post("/jobs/claim", json={})


@postgresql_only
def test_a_remembered_key_check_runs_no_statement(listening, worker, seen):
    assert claim(worker).status_code == 204
    assert seen.reads() == 1
    seen.clear()
    for _ in range(20):
        assert claim(worker).status_code == 204
    assert (seen.reads(), seen.writes()) == (0, 0)


@pytest.fixture
def app_settings(request) -> dict:
    return dict(getattr(request, "param", {}))


@pytest.mark.parametrize(
    ("backend", "app_settings"),
    [("sqlite", {}), ("sqlite", {"WAKEUPS": "poll"}), ("postgresql", {"WAKEUPS": "poll"})],
    ids=["sqlite", "sqlite-poll", "postgresql-poll"],
    indirect=True,
)
def test_without_notifications_every_key_check_reads_the_key(app, keys, seen):
    """SQLite (either mode), and PostgreSQL in poll mode: nothing tells a process that a key changed, so it
    remembers nothing, even while a long poll waits."""
    caller = keys.worker("w-1")
    with app.extensions["queuelog"]["queue"].wakeups.waiting(["nothing"]):
        time.sleep(0.2)
        for n in range(1, 6):
            assert claim(caller).status_code == 204
            assert seen.reads() == n


def test_a_revocation_in_this_process_holds_from_the_next_request(backend, keys):
    caller = keys.worker("w-here")
    assert claim(caller).status_code == 204
    keys.store.revoke_key("w-here")
    assert claim(caller).status_code == 401


@postgresql_only
def test_without_its_notification_a_revocation_holds_here_but_not_elsewhere(
    monkeypatch, listening, keys, database_url, seen
):
    """With the notifications dropped (as by a listener whose connection died without a word), a revocation
    made in this process still holds from the next request (it forgets at once), and one made elsewhere
    does not: the notification is what carries it."""
    monkeypatch.setattr(listening, "_received", lambda payload: None)
    here, far = keys.worker("w-here"), keys.worker("w-far")
    remembered(lambda: claim(here), seen)
    remembered(lambda: claim(far), seen)
    keys.store.revoke_key("w-here")
    assert claim(here).status_code == 401
    remembered(
        lambda: claim(far), seen
    )  # the revocation here forgot every remembered check; far's is remembered again
    other, store = elsewhere(database_url)
    try:
        store.revoke_key("w-far")
        time.sleep(0.2)
        assert claim(far).status_code == 204
    finally:
        other.dispose()


@postgresql_only
def test_a_revocation_elsewhere_holds_once_its_notification_arrives(listening, keys, database_url, seen):
    caller = keys.worker("w-far")
    other, store = elsewhere(database_url)
    try:
        remembered(lambda: claim(caller), seen)
        store.revoke_key("w-far")
        assert answered_within(lambda: claim(caller), 401, 2.0) < 1.0
        for _ in range(5):
            assert claim(caller).status_code == 401
        assert seen.reads() >= 1  # the notification made it read the key again
    finally:
        other.dispose()


@postgresql_only
@pytest.mark.parametrize("change", ["deactivated", "demoted"])
def test_a_user_changed_elsewhere_is_seen_once_its_notification_arrives(
    listening, keys, database_url, change, seen
):
    boss = keys.admin("boss")  # the first admin stays active
    for _ in range(2):
        assert boss.post("/jobs", json={"type": "email", "priority": "critical"}).status_code == 201
        seen.clear()
    assert boss.post("/jobs", json={"type": "email", "priority": "critical"}).status_code == 201
    assert seen.reads() == 0  # remembered
    other, store = elsewhere(database_url)
    try:
        if change == "deactivated":
            store.update_user("boss", actor="cli", active=False)
            assert answered_within(lambda: boss.get("/jobs"), 401, 2.0) < 1.0
        else:
            store.update_user("boss", actor="cli", role="producer")
            critical = {"type": "email", "priority": "critical"}
            assert answered_within(lambda: boss.post("/jobs", json=critical), 403, 2.0) < 1.0
    finally:
        other.dispose()


@postgresql_only
@pytest.mark.parametrize(
    "change",
    [
        "UPDATE {schema}.api_keys SET revoked_at = now() WHERE name = 'w-sql'",
        "DELETE FROM {schema}.api_keys WHERE name = 'w-sql'",
        "TRUNCATE {schema}.api_keys",
        "UPDATE {schema}.users SET active = false WHERE username = 'sql-user'",
    ],
    ids=["revoked", "deleted", "truncated", "user-deactivated"],
)
def test_a_change_made_in_sql_reaches_the_process_too(listening, keys, db, seen, change):
    """The notification comes from triggers (migration 0013), so any writer is heard, not only queuelog;
    here from a session whose search path is another schema, naming the tables with theirs."""
    if "users" in change:
        producer = keys.producer("sql-user")
        ask = lambda: producer.get("/jobs")  # noqa: E731
    else:
        worker = keys.worker("w-sql")
        ask = lambda: claim(worker)  # noqa: E731
    remembered(ask, seen)
    with db.engine.begin() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        conn.execute(text("SET LOCAL search_path = public"))  # this transaction only
        conn.execute(text(change.format(schema=f'"{schema}"')))
    assert answered_within(ask, 401, 2.0) < 1.0


@postgresql_only
def test_a_last_used_write_notifies_nobody(listening, worker, db, seen):
    assert claim(worker).status_code == 204
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE api_keys SET last_used_at = now() - interval '1 hour'"))
    time.sleep(0.2)  # a notification, had there been one, would have come by now
    seen.clear()
    assert claim(worker).status_code == 204
    assert seen.reads() == 0


@postgresql_only
def test_a_listener_that_is_lately_deaf_remembers_nothing(listening, worker, seen):
    assert claim(worker).status_code == 204
    seen.clear()
    listening._heard = time.monotonic() - wakeups_module._QUIET_SECONDS - wakeups_module._DEAF_SECONDS - 1
    assert listening.keys_generation() is None
    assert claim(worker).status_code == 204
    assert seen.reads() == 1


@postgresql_only
def test_a_quiet_listener_checks_itself_and_keeps_remembering(monkeypatch, app, worker, seen):
    """With nothing else to hear, the listener sends itself a notification after its quiet time, and
    hearing it proves it still listens."""
    monkeypatch.setattr(wakeups_module, "_QUIET_SECONDS", 0.5)
    monkeypatch.setattr(wakeups_module, "_DEAF_SECONDS", 1.0)
    hub = app.extensions["queuelog"]["queue"].wakeups
    with hub.waiting(["nothing"]):
        wait_listening(hub)
        assert claim(worker).status_code == 204
        seen.clear()
        heard = hub._heard
        time.sleep(3.5)  # several quiet times: without its own notifications it would count as deaf
        assert hub._heard > heard
        assert hub.keys_generation() is not None
        assert claim(worker).status_code == 204
        assert seen.reads() == 0


@postgresql_only
def test_a_killed_listener_forgets_and_listens_again(listening, worker, db, seen):
    assert claim(worker).status_code == 204
    before = listening.keys_generation()
    with db.engine.begin() as conn:  # this installation's listeners (the other test processes have theirs)
        killed = conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                " AND query = format('LISTEN %I', 'queuelog_jobs:' || current_schema())"
            )
        ).fetchall()
    assert killed
    deadline = time.monotonic() + 10
    while listening.keys_generation() in (None, before):
        assert time.monotonic() < deadline, "the listener did not come back"
        time.sleep(0.01)
    seen.clear()
    assert claim(worker).status_code == 204
    assert seen.reads() == 1  # read again after the listener came back: what it missed is not trusted


def test_last_use_is_written_to_the_minute_in_one_statement(backend, app, keys, db, seen):
    store: AdminStore = app.extensions["queuelog"]["admin"]
    callers = [keys.worker(f"w-{n}") for n in range(5)]
    for caller in callers:  # first uses: each written at once
        assert claim(caller).status_code == 204
    assert seen.writes() == 5
    assert all(key.last_used_at is not None for key, _ in store.keys())
    seen.clear()
    for caller in callers:  # used again within the minute: nothing to write
        assert claim(caller).status_code == 204
    assert seen.writes() == 0
    # A minute on: the keys say they were used more than a minute ago, and this process last wrote more than
    # a minute ago; the next request writes every key used since in one statement.
    past = utcnow() - timedelta(minutes=5)
    with db.session(write=True) as session, session.begin():
        session.execute(update(ApiKey).values(last_used_at=past))
    store._stamps._written = {key.id: past for key, _ in store.keys()}  # as this process remembers it
    store._checked.clear()  # and the rows it remembers (PostgreSQL) say so too
    seen.clear()
    used: dict[str, tuple] = {}
    for n, caller in enumerate(callers):  # this process wrote within the minute: each use waits for the next
        before = utcnow()
        assert claim(caller).status_code == 204
        used[f"w-{n}"] = (before, utcnow())
        time.sleep(0.02)
    assert seen.writes() == 0
    # Meanwhile another process wrote a later use of w-4: it stays (last uses only move forward).
    later = utcnow() + timedelta(hours=1)
    with db.session(write=True) as session, session.begin():
        session.execute(update(ApiKey).where(ApiKey.name == "w-4").values(last_used_at=later))
    seen.clear()
    store._stamps._wrote = past  # a minute on
    assert claim(callers[0]).status_code == 204
    assert seen.writes() == 1
    last = {key.name: key.last_used_at for key, _ in store.keys()}
    assert last["w-4"] == later
    for name in ("w-1", "w-2", "w-3"):  # each key's own time, not the write's
        assert used[name][0] <= last[name] <= used[name][1], (name, last[name], used[name])
    assert last["w-0"] > used["w-0"][1]  # used again just now
