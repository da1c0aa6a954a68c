"""The command line (README, "Command line"); automation relies on its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from queuelog.auth import authenticate_key
from tests.conftest import ROOT


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
    principal = authenticate_key(db, key)
    assert principal is not None and principal.name == "carol" and principal.role == "producer"
    result = runner.invoke(args=["keys", "create", "w-1", "--kind", "worker"])
    worker_key = result.stdout.strip().splitlines()[-1]
    assert authenticate_key(db, worker_key).is_worker
    assert runner.invoke(args=["keys", "revoke", "w-1"]).exit_code == 0
    assert authenticate_key(db, worker_key) is None
    assert runner.invoke(args=["keys", "revoke", "nope"]).exit_code != 0
    assert runner.invoke(args=["keys", "create", "x", "--kind", "producer"]).exit_code != 0  # needs --user


def test_types_add_list_disable(runner, tmp_path, producer):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["url"]}))
    result = runner.invoke(
        args=["types", "add", "webhook", "--description", "POST a URL", "--schema", str(schema)]
    )
    assert result.exit_code == 0, result.output
    listing = runner.invoke(args=["types", "list"]).output.splitlines()
    assert "webhook\tenabled\tschema\tPOST a URL" in listing
    assert producer.post("/jobs", json={"type": "webhook", "payload": {}}).status_code == 422
    assert producer.post("/jobs", json={"type": "webhook", "payload": {"url": "x"}}).status_code == 201
    assert runner.invoke(args=["types", "disable", "webhook"]).exit_code == 0
    assert (
        "webhook\tdisabled\tschema\tPOST a URL" in runner.invoke(args=["types", "list"]).output.splitlines()
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
