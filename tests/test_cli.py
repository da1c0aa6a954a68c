"""The command line (docs/cli.md); automation relies on its output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from queuelog.models import User
from queuelog.queue.admin import AdminStore
from tests.conftest import ROOT

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _recent(stamp: str) -> bool:
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return abs(datetime.now(UTC) - when) < timedelta(minutes=5)


def test_users_create_with_password_and_prompt(runner, app):
    result = runner.invoke(
        args=["users", "create", "carol", "--role", "producer", "--password", "long-password"]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        args=["users", "create", "dave", "--role", "admin"], input="pass-word-1\npass-word-1\n"
    )
    assert result.exit_code == 0, result.output
    again = runner.invoke(
        args=["users", "create", "carol", "--role", "producer", "--password", "long-password"]
    )
    assert again.exit_code != 0 and "already exists" in again.output
    bad_role = runner.invoke(
        args=["users", "create", "erin", "--role", "root", "--password", "long-password"]
    )
    assert bad_role.exit_code != 0


def test_keys_create_prints_the_key_last_and_it_works(runner, app):
    runner.invoke(args=["users", "create", "carol", "--role", "producer", "--password", "long-password"])
    db = app.extensions["queuelog"]["db"]
    result = runner.invoke(args=["keys", "create", "carol-laptop", "--kind", "producer", "--user", "carol"])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip().splitlines()[-1]
    principal = AdminStore(db).authenticate(key)
    assert principal is not None and principal.name == "carol" and principal.role == "producer"
    result = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"])
    worker_key = result.stdout.strip().splitlines()[-1]
    assert AdminStore(db).authenticate(worker_key).is_worker
    assert runner.invoke(args=["keys", "revoke", "w-1"]).exit_code == 0
    assert AdminStore(db).authenticate(worker_key) is None
    assert runner.invoke(args=["keys", "revoke", "nope"]).exit_code != 0
    assert runner.invoke(args=["keys", "create", "x", "--kind", "producer"]).exit_code != 0  # needs --user


def test_refusals_go_to_stderr_with_a_nonzero_exit(runner, app):
    assert runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"]).exit_code == 0
    again = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"])
    assert again.exit_code == 1
    assert again.stdout == "" and "Error: a key named 'w-1' already exists" in again.stderr
    orphan = runner.invoke(args=["keys", "create", "x", "--kind", "producer"])
    assert orphan.exit_code == 1 and "a producer key belongs to a user: give --user" in orphan.stderr
    blank = runner.invoke(args=["users", "create", "erin", "--role", "producer", "--password", " " * 10])
    assert blank.exit_code == 1 and "password must not be only whitespace" in blank.stderr
    short = runner.invoke(args=["users", "create", "erin", "--role", "producer", "--password", "short"])
    assert short.exit_code == 1 and "at least 8 characters" in short.stderr
    bogus = runner.invoke(args=["db", "upgrade", "--revision", "bogus"])
    assert bogus.exit_code == 1  # one line, no traceback:
    assert bogus.stderr == "Error: Can't locate revision identified by 'bogus'\n"


def test_a_revoked_keys_name_is_free_again(runner, app):
    db = app.extensions["queuelog"]["db"]
    old = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"]).stdout.strip()
    assert runner.invoke(args=["keys", "revoke", "w-1"]).exit_code == 0
    new = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"])
    assert new.exit_code == 0, new.output
    assert (
        AdminStore(db).authenticate(old) is None
        and AdminStore(db).authenticate(new.stdout.strip()).name == "w-1"
    )
    assert runner.invoke(args=["keys", "revoke", "w-1"]).exit_code == 0  # the new one
    assert AdminStore(db).authenticate(new.stdout.strip()) is None
    assert runner.invoke(args=["keys", "revoke", "w-1"]).exit_code == 0  # nothing left to revoke: fine


def test_users_list(runner, app):
    runner.invoke(args=["users", "create", "carol", "--role", "producer", "--password", "long-password"])
    AdminStore(app.extensions["queuelog"]["db"]).update_user("carol", actor="test", active=False)
    lines = [line.split("\t") for line in runner.invoke(args=["users", "list"]).stdout.splitlines()]
    assert [line[:3] for line in lines] == [["admin", "admin", "active"], ["carol", "producer", "inactive"]]
    assert all(STAMP.fullmatch(line[3]) for line in lines)
    # carol was made just now; the admin when the suite seeded its template database (before this test)
    assert _recent(lines[1][3]) and lines[0][3] <= lines[1][3]


def test_users_set_password_with_option_and_prompt(runner, app):
    db = app.extensions["queuelog"]["db"]
    runner.invoke(args=["users", "create", "carol", "--role", "producer", "--password", "long-password"])

    def password_is(password: str) -> bool:
        with db.session() as s:
            return s.scalar(select(User).where(User.username == "carol")).check_password(password)

    given = runner.invoke(args=["users", "set-password", "carol", "--password", "second-password"])
    assert given.exit_code == 0, given.output
    assert password_is("second-password") and not password_is("long-password")
    prompted = runner.invoke(
        args=["users", "set-password", "carol"], input="third-password\nthird-password\n"
    )
    assert prompted.exit_code == 0, prompted.output
    assert password_is("third-password")
    # the two entries differ: asked again, and nothing changes until they match
    mismatched = runner.invoke(
        args=["users", "set-password", "carol"],
        input="fourth-password\nfourth-passwort\nfourth-password\nfourth-password\n",
    )
    assert mismatched.exit_code == 0, mismatched.output
    assert "do not match" in mismatched.output
    assert password_is("fourth-password")
    gave_up = runner.invoke(args=["users", "set-password", "carol"], input="fifth-password\nother-one\n")
    assert gave_up.exit_code == 1 and password_is("fourth-password")  # no match before the input ended
    blank = runner.invoke(args=["users", "set-password", "carol", "--password", "\t" * 9])
    assert blank.exit_code == 1 and "only whitespace" in blank.stderr
    nobody = runner.invoke(args=["users", "set-password", "nobody", "--password", "long-password"])
    assert nobody.exit_code == 1 and "no user 'nobody'" in nobody.stderr
    assert password_is("fourth-password")


def test_keys_list_never_shows_a_key(runner, app):
    db = app.extensions["queuelog"]["db"]
    runner.invoke(args=["users", "create", "carol", "--role", "producer", "--password", "long-password"])
    worker = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"]).stdout.strip()
    producer = runner.invoke(args=["keys", "create", "lap", "--kind", "producer", "--user", "carol"]).stdout
    AdminStore(db).authenticate(worker)  # marks it used
    runner.invoke(args=["keys", "revoke", "w-1"])
    runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"])
    listing = runner.invoke(args=["keys", "list"]).stdout
    assert "ql_" not in listing and worker not in listing and producer.strip() not in listing
    lines = [line.split("\t") for line in listing.splitlines()]
    assert [line[:3] for line in lines] == [
        ["w-1", "worker", "-"],
        ["lap", "producer", "carol"],
        ["w-1", "worker", "-"],
    ]
    (old_w, lap, new_w) = lines
    assert STAMP.fullmatch(old_w[4]) and STAMP.fullmatch(old_w[5]) and _recent(old_w[5])  # used, revoked
    assert lap[4:] == ["-", "-"] and new_w[4:] == ["-", "-"]
    assert all(STAMP.fullmatch(line[3]) for line in lines)


def test_types_add_list_disable(runner, tmp_path, producer):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["url"]}))
    result = runner.invoke(
        args=["types", "add", "webhook", "--description", "POST a URL", "--schema", str(schema)]
    )
    assert result.exit_code == 0, result.output
    listing = runner.invoke(args=["types", "list"]).output.splitlines()
    assert "webhook\tenabled\tschema\tPOST a URL\t-\t-" in listing
    assert producer.post("/jobs", json={"type": "webhook", "payload": {}}).status_code == 422
    assert producer.post("/jobs", json={"type": "webhook", "payload": {"url": "x"}}).status_code == 201
    assert runner.invoke(args=["types", "disable", "webhook"]).exit_code == 0
    assert (
        "webhook\tdisabled\tschema\tPOST a URL\t-\t-"
        in runner.invoke(args=["types", "list"]).output.splitlines()
    )
    assert producer.post("/jobs", json={"type": "webhook", "payload": {"url": "x"}}).status_code == 422
    assert runner.invoke(args=["types", "add", "webhook"]).exit_code != 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": 12}')
    assert (
        "not a valid JSON Schema"
        in runner.invoke(args=["types", "add", "other", "--schema", str(bad)]).output
    )
    assert runner.invoke(args=["types", "disable", "missing"]).exit_code != 0


def _flask(args, env):
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # the flask command in subprocesses, one after another
def test_real_command_line_on_a_new_sqlite_file(tmp_path):
    """What a new user types: the database appears by itself; the key is the last line of stdout."""
    env = {
        **os.environ,
        "QUEUELOG_DATABASE_URL": f"sqlite:///{tmp_path / 'new.sqlite3'}",
        "QUEUELOG_SECRET_KEY": "k",
    }
    env.pop("QUEUELOG_ADMIN_PASSWORD", None)
    upgrade = _flask(["db", "upgrade"], env)
    assert upgrade.returncode == 0, upgrade.stderr
    assert "created the first admin: username 'admin', password" in upgrade.stderr
    created = _flask(["keys", "create", "w-1", "--kind", "worker"], env)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[-1].startswith("ql_")
    assert len(created.stdout.splitlines()) == 1  # the key alone on stdout; the notice goes to stderr
    listing = _flask(["types", "list"], env)
    assert [line.split("\t")[0] for line in listing.stdout.splitlines()] == ["email", "pdf", "sync"]


def test_db_upgrade_sets_up_postgresql(backend, tmp_path):
    if backend.name != "postgresql":
        import pytest

        pytest.skip("PostgreSQL-only: SQLite upgrades itself (see the test above)")
    from sqlalchemy import create_engine, text

    from tests.conftest import PG_URL, _pg_schema_url

    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    schema = f"queuelog_cli_{os.getpid()}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        env = {
            **os.environ,
            "QUEUELOG_DATABASE_URL": _pg_schema_url(PG_URL, schema),
            "QUEUELOG_SECRET_KEY": "k",
        }
        before = _flask(["types", "list"], env)
        assert before.returncode != 0  # no schema yet: PostgreSQL is never migrated behind your back
        upgrade = _flask(["db", "upgrade"], env)
        assert upgrade.returncode == 0, upgrade.stderr
        listing = _flask(["types", "list"], env)
        assert [line.split("\t")[0] for line in listing.stdout.splitlines()] == ["email", "pdf", "sync"]
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
