"""Shared fixtures: an app on a real database file (or the real PostgreSQL server), clients, keys, servers.

The ``backend`` fixture runs every test that uses ``app`` on SQLite, and again on PostgreSQL when
``QUEUELOG_TEST_POSTGRES_URL`` is set (``.ci/run`` sets it). Each PostgreSQL test session works in a schema
of its own, dropped at the end. Every test starts from a new SQLite file (a copy of a template, migrated and
seeded once) or from emptied PostgreSQL tables, which its app seeds.

The tests come in tiers (below, "tiers"): the bare ``pytest`` runs the fast one, ``pytest -m ""`` all.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from sqlalchemy import create_engine, text

from queuelog import create_app
from queuelog.config import FALSE_WORDS
from queuelog.db import Database
from queuelog.gunicorn_worker import WORKER_CLASS
from queuelog.models import Base
from queuelog.queue.admin import AdminStore

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("QUEUELOG_TEST_POSTGRES_URL")
# Through PgBouncer in transaction mode (tests/test_pgbouncer.py runs the suite so): a schema made
# beforehand, which the pooler's connect_query puts on the search path, and no prepared statements.
PG_SCHEMA = os.environ.get("QUEUELOG_TEST_POSTGRES_SCHEMA")
PG_PREPARED = os.environ.get("QUEUELOG_DB_PREPARED_STATEMENTS", "true").lower() not in FALSE_WORDS
ADMIN_PASSWORD = "admin-password-for-tests"
# One cheap hash instead of scrypt (~0.4 s each): nearly every test makes users. Set in the environment, so
# that the servers, workers and commands the tests start in subprocesses hash cheaply too.
os.environ["QUEUELOG_PASSWORD_HASH"] = "pbkdf2:sha256:1"
TEST_SETTINGS = {"ADMIN_PASSWORD": ADMIN_PASSWORD, "SECRET_KEY": "test-secret-key"}  # and a DATABASE_URL
TABLES = tuple(table.name for table in Base.metadata.sorted_tables)


# -- databases ----------------------------------------------------------------------------------------


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, template: Path):
        self.template = template

    def fresh_url(self, folder: Path) -> str:
        """A new database file, copied from a migrated template (much faster than migrating each time)."""
        path = folder / "queuelog.sqlite3"
        shutil.copy(self.template, path)
        return f"sqlite:///{path}"


class PostgresBackend:
    name = "postgresql"

    def __init__(self, url: str, schema: str):
        self.url = url
        self.schema = schema
        self.engine = create_engine(url, connect_args={} if PG_PREPARED else {"prepare_threshold": None})

    def fresh_url(self, folder: Path) -> str:
        with self.engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        return self.url


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(scope="session")
def sqlite_backend(tmp_path_factory) -> SQLiteBackend:
    """Each test's database is a copy of one template, migrated and seeded once per session as the app
    seeds a new database (the job types, the first admin): the app of each test then only reads them."""
    template = tmp_path_factory.mktemp("template") / "template.sqlite3"
    db = Database(f"sqlite:///{template}")
    db.upgrade()
    db.dispose()
    seeded = create_app(
        {"TESTING": True, "QUEUELOG": {**TEST_SETTINGS, "DATABASE_URL": f"sqlite:///{template}"}}
    )
    seeded.extensions["queuelog"]["db"].dispose()
    return SQLiteBackend(template)


PG_HOWTO = (
    "set QUEUELOG_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test "
    "(a PostgreSQL server and database you may write to) to run them"
)
_PG_NOT_RUN = pytest.StashKey[int]()


def _engine(item) -> str | None:
    """The engine a test runs on: its ``backend`` (tests of the app) or ``db`` (tests/engines) parameter."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get("backend", callspec.params.get("db"))


# -- tiers --------------------------------------------------------------------------------------------
# Every test belongs to the fast tier unless a rule below puts it in a slower one; the bare ``pytest`` runs
# the fast tier (pyproject.toml's addopts: -m "not slow and not browser and not system"), ``pytest -m ""``
# runs all, as .ci/run does. Naming files or tests on the command line runs them whatever their tier.
TESTS = Path(__file__).resolve().parent
# Folders and files of a tier, relative to tests/.
BROWSER_PATHS = ("e2e",)
SYSTEM_PATHS = (
    "test_install.py",
    "test_readme.py",
    "test_readme_sections.py",
    "test_docs_examples.py",
    "test_help.py",
)
SLOW_PATHS = (
    "client",
    "worker",
    "test_concurrency.py",
    "test_scale_out.py",
    "test_maintenance_processes.py",
    "test_flow_control_servers.py",
    "test_bench.py",
    "api/test_long_poll.py",
    "queue/test_wakeups.py",
    "test_pgbouncer.py",
)
# Fixtures that start servers or processes: a test that uses one is slow wherever it is.
SLOW_FIXTURES = {"live_server", "server", "served", "workers", "fake_worker"}
DEFAULT_TIERS = "not slow and not browser and not system"


def _under(item, paths: tuple[str, ...]) -> bool:
    return any(item.path.is_relative_to(TESTS / path) for path in paths)


def _tier(item) -> None:
    if _under(item, BROWSER_PATHS):
        item.add_marker(pytest.mark.browser)
    if _under(item, SYSTEM_PATHS):
        item.add_marker(pytest.mark.system)
    if _under(item, SLOW_PATHS) or SLOW_FIXTURES.intersection(item.fixturenames):
        item.add_marker(pytest.mark.slow)
    if _engine(item) == "postgresql":
        item.add_marker(pytest.mark.postgres)


def pytest_configure(config):
    """Tests named on the command line run whatever their tier: the tier filter of addopts is lifted when
    the command names files or tests and sets no -m of its own."""
    args = config.invocation_params.args
    named = [a for a in args if not a.startswith("-") and Path(a.split("::")[0]).exists()]
    if named and not any(a == "-m" or a.startswith("-m") for a in args):
        if config.option.markexpr == DEFAULT_TIERS:
            config.option.markexpr = ""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Each test gets the markers of its tier (_tier). Without QUEUELOG_TEST_POSTGRES_URL the PostgreSQL
    half of the suite is deselected, and one line of the summary says so (pytest_terminal_summary), instead
    of a skip line for each test."""
    for item in items:
        _tier(item)
    if PG_URL:
        return
    postgres = [item for item in items if _engine(item) == "postgresql"]
    if postgres:
        items[:] = [item for item in items if _engine(item) != "postgresql"]
        config.hook.pytest_deselected(items=postgres)
        config.stash[_PG_NOT_RUN] = len(postgres)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: tell the controller (below)
            config.workeroutput["postgres_not_run"] = len(postgres)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller collects nothing itself: its summary takes the count from the workers."""
    count = getattr(node, "workeroutput", {}).get("postgres_not_run", 0)
    node.config.stash[_PG_NOT_RUN] = max(node.config.stash.get(_PG_NOT_RUN, 0), count)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    count = config.stash.get(_PG_NOT_RUN, 0)
    if count:
        terminalreporter.write_line(
            f"NOT RUN: {count} PostgreSQL test{'s' if count != 1 else ''} (deselected): {PG_HOWTO}",
            yellow=True,
            bold=True,
        )
    if config.option.markexpr == DEFAULT_TIERS:
        terminalreporter.write_line(
            "This was the fast tier: pytest -m '' runs every test (the slow, browser and system tiers too).",
            yellow=True,
        )


@pytest.fixture(scope="session")
def postgresql_backend():
    if not PG_URL:
        pytest.skip(f"PostgreSQL tests: {PG_HOWTO}")
    if PG_SCHEMA:  # through PgBouncer: its connect_query puts this schema on the search path
        db = Database(PG_URL, prepared_statements=PG_PREPARED)
        db.upgrade()
        db.dispose()
        backend = PostgresBackend(PG_URL, PG_SCHEMA)
        yield backend
        backend.engine.dispose()
        return
    schema = f"queuelog_test_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = _pg_schema_url(PG_URL, schema)
    db = Database(url)
    db.upgrade()
    db.dispose()
    backend = PostgresBackend(url, schema)
    yield backend
    backend.engine.dispose()
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request):
    """The database engine under test: SQLite always, PostgreSQL when its URL is set."""
    return request.getfixturevalue(f"{request.param}_backend")


@pytest.fixture
def app_settings() -> dict[str, Any]:
    """QUEUELOG_* settings for the app; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def database_url(backend, tmp_path) -> str:
    return backend.fresh_url(tmp_path)


@pytest.fixture
def app(database_url, app_settings, tmp_path):
    settings = {**TEST_SETTINGS, "DATABASE_URL": database_url, **app_settings}
    app = create_app({"TESTING": True, "QUEUELOG": settings})
    yield app
    app.extensions["queuelog"]["queue"].wakeups.stop()  # its listener's connection goes now, not at gc
    app.extensions["queuelog"]["db"].dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def queue(app):
    return app.extensions["queuelog"]["queue"]


# -- callers ------------------------------------------------------------------------------------------


class Caller:
    """A test client that sends one API key with every request."""

    def __init__(self, client, key: str, name: str):
        self.client = client
        self.key = key
        self.name = name
        self.headers = {"Authorization": f"Bearer {key}"}

    def _headers(self, extra):
        return {**self.headers, **(extra or {})}

    def get(self, path: str, **kw):
        return self.client.get(path, headers=self._headers(kw.pop("headers", None)), **kw)

    def post(self, path: str, json: Any = None, **kw):
        if json is not None:
            kw["json"] = json
        return self.client.post(path, headers=self._headers(kw.pop("headers", None)), **kw)


class Keys:
    """Makes users and API keys in the app's database."""

    def __init__(self, app, client):
        self.db = app.extensions["queuelog"]["db"]
        self.store: AdminStore = app.extensions["queuelog"]["admin"]
        self.client = client
        self.users: set[str] = set()

    def raw(self, kind: str, name: str, *, role: str = "producer") -> str:
        if kind == "worker":
            return self.store.create_key(name, "worker")
        if name not in self.users:
            if name != "admin":
                self.store.create_user(name, role, "password-" + name)
            self.users.add(name)
        return self.store.create_key(f"{name}-{secrets.token_hex(3)}", "producer", username=name)

    def worker(self, name: str = "worker-1") -> Caller:
        return Caller(self.client, self.raw("worker", name), name)

    def producer(self, name: str = "alice") -> Caller:
        return Caller(self.client, self.raw("producer", name), name)

    def admin(self, name: str = "admin") -> Caller:
        if name == "admin":
            return Caller(self.client, self.raw("producer", "admin"), "admin")
        return Caller(self.client, self.raw("producer", name, role="admin"), name)


@pytest.fixture
def keys(app, client) -> Keys:
    return Keys(app, client)


@pytest.fixture
def producer(keys) -> Caller:
    return keys.producer("alice")


@pytest.fixture
def worker(keys) -> Caller:
    return keys.worker("worker-1")


@pytest.fixture
def admin(keys) -> Caller:
    return keys.admin()


# -- a real server ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """gunicorn serving ``app:app`` from the repository root (or ``cwd``), on the test's database."""

    def __init__(
        self,
        database_url: str,
        instance: Path,
        *,
        workers: int = 2,
        threads: int = 8,
        env=None,
        cwd: Path = ROOT,
    ):
        self.port = free_port()
        self.cwd = cwd  # where ``app.py`` is
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "QUEUELOG_DATABASE_URL": database_url,
            "QUEUELOG_SECRET_KEY": "test-secret-key",
            "QUEUELOG_ADMIN_PASSWORD": ADMIN_PASSWORD,
            **(env or {}),
        }
        self.args = [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--worker-class",
            WORKER_CLASS,  # as queuelog/gunicorn_conf.py says
            "--bind",
            f"127.0.0.1:{self.port}",
            "--log-level",
            "warning",
            "--graceful-timeout",
            "2",
            "app:app",
        ]
        self.log = instance / f"gunicorn-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> LiveServer:
        with open(self.log, "ab") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.args,
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log.read_text()}")
            try:
                if requests.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass  # not listening yet, or too busy to answer: try again
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not start: {self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the master and its workers at once, as a crash would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def live_server(app, database_url, tmp_path):
    """Start gunicorn on the test's database; the ``app`` fixture has already migrated and seeded it."""
    servers: list[LiveServer] = []

    def start(**kw) -> LiveServer:
        server = LiveServer(database_url, tmp_path, **kw)
        servers.append(server)  # stopped at teardown even if it fails to start
        return server.start()

    yield start
    for server in servers:
        server.stop()


# -- the pages ----------------------------------------------------------------------------------------

_CSRF = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


def csrf_token(html: str) -> str:
    match = _CSRF.search(html)
    assert match, "the page has no CSRF token"
    return match.group(1)


class Browser:
    """A Flask test client that logs in through the real login form and posts forms with their token."""

    def __init__(self, client):
        self.client = client

    def login(self, username: str, password: str, next_url: str | None = None):
        page = self.client.get("/login")
        path = "/login" + (f"?next={next_url}" if next_url else "")
        return self.client.post(
            path,
            data={
                "csrf_token": csrf_token(page.get_data(as_text=True)),
                "username": username,
                "password": password,
            },
        )

    def get(self, path: str, **kw):
        return self.client.get(path, **kw)

    def submit(self, page_path: str, action: str | None = None, **data):
        """Load a page, take its CSRF token, post ``data`` to ``action`` (or back to the page)."""
        page = self.client.get(page_path)
        data.setdefault("csrf_token", csrf_token(page.get_data(as_text=True)))
        return self.client.post(action or page_path, data=data)


@pytest.fixture
def browser(client) -> Browser:
    return Browser(client)


@pytest.fixture
def producer_browser(app, keys) -> Browser:
    keys.raw("producer", "alice")  # makes the user alice with password "password-alice"
    b = Browser(app.test_client())
    assert b.login("alice", "password-alice").status_code == 302
    return b


@pytest.fixture
def admin_browser(app) -> Browser:
    b = Browser(app.test_client())
    assert b.login("admin", ADMIN_PASSWORD).status_code == 302
    return b


def in_child(work) -> bytes:
    """Fork, run ``work()`` in the child and return the bytes it returned (the child must exit 0)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(write, work())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    answer = os.read(read, 16)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return answer


def table_database(folder: Path):
    """A bare ``Database`` on a new SQLite file with one table ``t (n INTEGER UNIQUE)``, disposed after
    (the tests of db.py's writer and readers: ``yield from`` it in a fixture)."""
    database = Database(f"sqlite:///{folder / 'table.sqlite3'}")
    with database.cursor(write=True) as cur:
        cur.execute("CREATE TABLE t (n INTEGER NOT NULL UNIQUE)")
    yield database
    database.dispose()
