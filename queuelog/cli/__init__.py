"""``flask --app app ...`` commands. Automation relies on their output: keep it stable.

The ``types`` group is made in ``cli/types.py`` (which adds ``types limit``), the ``schedules`` group in
``cli/schedules.py`` and the ``batches`` group in ``cli/batches.py``; this package imports them, and none
imports it back."""

from __future__ import annotations

import json

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from queuelog.access.auth import AuthError, Refusal
from queuelog.cli.batches import batches_cli
from queuelog.cli.rows import text_cell, time_cell
from queuelog.cli.schedules import schedules_cli
from queuelog.cli.types import types_cli
from queuelog.config import parse_duration
from queuelog.db import RevisionRefused
from queuelog.models import KEY_KINDS, ROLES
from queuelog.queue import Code, QueueError
from queuelog.queue.types import SchemaRefused


def _ext(name: str):
    return current_app.extensions["queuelog"][name]


def _fail(message: str) -> None:
    """Print ``Error: message`` on stderr and exit with status 1."""
    raise click.ClickException(message)


# The command line's own wording where it differs from the refusal's message (which names no options).
_WORDING = {
    Refusal.PRODUCER_KEY_NEEDS_USER: "a producer key belongs to a user: give --user",
    Refusal.WORKER_KEY_HAS_USER: "a worker key belongs to no user: leave out --user",
}


# The command line's words for refusing a new type (queuelog/queue/errors.py).
_TYPE_WORDS = {
    Code.BAD_TYPE_NAME: lambda p: (
        f"a type name is 1 to {p['max_length']} letters, digits, '_', '.', ':' or '-',"
        " starting with a letter or digit"
    ),
    Code.TYPE_EXISTS: lambda p: f"type {p['name']!r} already exists",
    Code.TOO_LONG: lambda p: f"--description: must be at most {p['limit']} characters",
    Code.LONE_SURROGATE: lambda p: "--description: must be valid UTF-8",
}


def _refused(exc: AuthError) -> None:
    _fail(_WORDING.get(exc.code, str(exc)))


db_cli = AppGroup("db", help="Database schema.")
users_cli = AppGroup("users", help="Users who log in to the pages.")
keys_cli = AppGroup("keys", help="API keys for workers and producers.")
jobs_cli = AppGroup("jobs", help="Jobs: retention.")


@jobs_cli.command("prune")
@click.option("--older-than", required=True, help="Age of finished jobs to delete: 7d, 12h, 30m, 45s.")
def jobs_prune(older_than: str) -> None:
    """Delete completed, failed and cancelled jobs that finished longer ago than --older-than.

    Pending and running jobs are never touched; deleted jobs free their idempotency keys."""
    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        _fail(str(exc))
    deleted = _ext("queue").prune(age)
    click.echo(f"pruned {deleted} jobs")


@db_cli.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target migration.")
def db_upgrade(revision: str) -> None:
    """Bring the database (SQLite or PostgreSQL) to the current schema."""
    from queuelog.queue.admin import first_start

    try:
        _ext("db").upgrade(revision)
    except RevisionRefused as exc:
        _fail(str(exc))
    if revision == "head":
        config = current_app.config["QUEUELOG"]
        first_start(
            _ext("queue"), _ext("admin"), config["JOB_TYPES"], config["ADMIN_PASSWORD"], current_app.logger
        )
    click.echo(f"database is at {revision}")


@users_cli.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--password", help="Prompted for when not given.")
def users_create(name: str, role: str, password: str | None) -> None:
    """Create a user."""
    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        _ext("admin").create_user(name, role, password)
    except AuthError as exc:
        _refused(exc)
    click.echo(f"created {role} {name}")


@users_cli.command("list")
def users_list() -> None:
    """List users: name, role, active or inactive, created (UTC), one per line, tab-separated."""
    for user in _ext("admin").users():
        state = "active" if user.active else "inactive"
        click.echo(f"{user.username}\t{user.role}\t{state}\t{time_cell(user.created_at)}")


@users_cli.command("set-password")
@click.argument("name")
@click.option("--password", help="Prompted for when not given.")
def users_set_password(name: str, password: str | None) -> None:
    """Set a user's password; every session of the user ends (they log in again)."""
    if password is None:
        password = click.prompt("New password", hide_input=True, confirmation_prompt=True)
    try:
        _ext("admin").update_user(name, actor="cli", password=password)
    except AuthError as exc:
        _refused(exc)
    click.echo(f"set the password of {name}; their sessions have ended")


@keys_cli.command("list")
def keys_list() -> None:
    """List API keys (never the keys themselves): name, kind, user, created, last used, revoked.

    Times are UTC; "-" stands for none (no user, never used, not revoked)."""
    for key, username in _ext("admin").keys():
        times = (key.created_at, key.last_used_at, key.revoked_at)
        click.echo("\t".join([key.name, key.kind, username or "-", *map(time_cell, times)]))


@keys_cli.command("create")
@click.argument("name")
@click.option("--kind", type=click.Choice(KEY_KINDS), required=True)
@click.option("--user", "username", help="The user a producer key acts for.")
def keys_create(name: str, kind: str, username: str | None) -> None:
    """Create an API key; the key is printed alone on the last line, once."""
    try:
        raw = _ext("admin").create_key(name, kind, username=username)
    except AuthError as exc:
        _refused(exc)
    click.echo(f"created {kind} key {name!r}; it is shown only now:", err=True)
    click.echo(raw)


@keys_cli.command("revoke")
@click.argument("name")
def keys_revoke(name: str) -> None:
    """Revoke an API key at once."""
    try:
        _ext("admin").revoke_key(name)
    except AuthError as exc:
        _refused(exc)
    click.echo(f"revoked key {name}")


@types_cli.command("add")
@click.argument("name")
@click.option("--description", default="", help="What jobs of this type do.")
@click.option("--schema", "schema_file", type=click.File("r"), help="A JSON Schema file for the payload.")
def types_add(name: str, description: str, schema_file) -> None:
    """Add a job type to the allowlist."""
    schema = None
    if schema_file is not None:
        try:
            schema = json.load(schema_file)
        except ValueError as exc:
            _fail(f"{schema_file.name}: not JSON: {exc}")
        except RecursionError:
            _fail(f"{schema_file.name}: nested too deeply")
    try:
        _ext("queue").types.create(name, "cli", description, schema)
    except SchemaRefused as problem:
        _fail(f"{schema_file.name}: {problem}")
    except QueueError as exc:
        _fail(_TYPE_WORDS[exc.code](exc.params))
    click.echo(f"added type {name}")


@types_cli.command("list")
def types_list() -> None:
    """List job types: name, state, whether a schema is set, description, concurrency limit, rate limit."""
    from queuelog.queue.limits import rate_text

    for t in _ext("queue").types.all():
        state = "disabled" if not t.enabled else ("paused" if t.paused else "enabled")
        schema = "schema" if t.payload_schema is not None else "-"
        concurrency = "-" if t.concurrency_limit is None else t.concurrency_limit
        click.echo(f"{t.name}\t{state}\t{schema}\t{text_cell(t.description)}\t{concurrency}\t{rate_text(t)}")


def _set_type(name: str, action: str, **changes) -> None:
    try:
        _ext("queue").types.change(name, "cli", action=f"type.{action}", **changes)
    except LookupError:
        _fail(f"no type {name!r}")


@types_cli.command("disable")
@click.argument("name")
def types_disable(name: str) -> None:
    """Refuse new jobs of this type (jobs already queued still run)."""
    _set_type(name, "disable", enabled=False)
    click.echo(f"disabled type {name}")


@types_cli.command("enable")
@click.argument("name")
def types_enable(name: str) -> None:
    """Accept jobs of this type again."""
    _set_type(name, "enable", enabled=True)
    click.echo(f"enabled type {name}")


@types_cli.command("pause")
@click.argument("name")
def types_pause(name: str) -> None:
    """Stop handing out jobs of this type to workers (enqueueing goes on)."""
    _set_type(name, "pause", paused=True)
    click.echo(f"paused type {name}")


@types_cli.command("resume")
@click.argument("name")
def types_resume(name: str) -> None:
    """Hand out jobs of this type again."""
    _set_type(name, "resume", paused=False)
    click.echo(f"resumed type {name}")


def register(app: Flask) -> None:
    for group in (db_cli, users_cli, keys_cli, types_cli, jobs_cli, schedules_cli, batches_cli):
        app.cli.add_command(group)
