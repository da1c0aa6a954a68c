"""Fixtures for the producer client's tests: one live gunicorn server per engine for the whole module (a
server takes a second or two to start), and a user of its own for each test, so tests see only their jobs.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import requests

from queuelog import create_app
from queuelog.client import Client
from queuelog.db import Database
from queuelog.queue.admin import AdminStore
from tests.conftest import ADMIN_PASSWORD, LiveServer
from tests.worker.processes import FAST


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request):
    """The engine under test, for a whole module (the server's database lives as long as the server)."""
    return request.getfixturevalue(f"{request.param}_backend")


@dataclass
class Served:
    """The live server, and a way to make keys in its database."""

    url: str
    port: int
    db: Database
    clients: list[Client] = field(default_factory=list)

    @property
    def store(self) -> AdminStore:
        return AdminStore(self.db)

    def producer_key(self, role: str = "producer") -> str:
        """A key for a new user of its own (``role`` producer or admin)."""
        name = f"u-{secrets.token_hex(4)}"
        self.store.create_user(name, role, "password-" + name)
        return self.store.create_key(f"{name}-key", "producer", username=name)

    def admin_key(self) -> str:
        return self.store.create_key(f"admin-{secrets.token_hex(4)}", "producer", username="admin")

    def worker_key(self) -> str:
        return self.store.create_key(f"w-{secrets.token_hex(4)}", "worker")

    def client(self, key: str | None = None, *, url: str | None = None, **options) -> Client:
        """A producer client (closed at the end of the test); a new producer's unless ``key`` is given."""
        options.setdefault("backoff", 0.05)
        made = Client(url or self.url, key or self.producer_key(), **options)
        self.clients.append(made)
        return made


@pytest.fixture(scope="module")
def server(backend, tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("client")
    url = backend.fresh_url(folder)
    # The app migrates (SQLite) and seeds the database: the admin, the job types email, pdf, sync.
    app = create_app(
        {
            "TESTING": True,
            "QUEUELOG": {
                "DATABASE_URL": url,
                "ADMIN_PASSWORD": ADMIN_PASSWORD,
                "SECRET_KEY": "test-secret-key",
            },
        }
    )
    db = app.extensions["queuelog"]["db"]
    live = LiveServer(url, folder, workers=1, threads=8, env=FAST).start()
    try:
        yield Served(live.url, live.port, db)
    finally:
        live.stop()
        db.dispose()


@pytest.fixture
def served(server) -> Iterator[Served]:
    """The module's server; the clients a test makes are closed when it ends."""
    yield server
    for made in server.clients:
        made.close()
    server.clients.clear()


RESERVED_TYPE = "sync"  # only the fake worker's tests enqueue it, and each finishes the jobs it makes


class FakeWorker:
    """Acts as a worker over plain HTTP (requests): claims the next job of RESERVED_TYPE and completes or
    fails it, optionally after a delay, in a thread of its own. The server is shared by a whole module, so
    tests enqueue that type only for jobs a fake worker will finish (else another test would claim them)."""

    def __init__(self, url: str, key: str):
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.threads: list[threading.Thread] = []

    def finish(self, *, result: dict | None = None, error: str | None = None) -> int:
        """Claim one job (waiting up to 10 s) and complete it with ``result`` or fail it with ``error``
        (not retryable); its id."""
        claim = {"types": [RESERVED_TYPE], "wait_seconds": 10}
        claimed = self.http.post(f"{self.url}/jobs/claim", json=claim)
        assert claimed.status_code == 200, claimed.text
        job = claimed.json()
        if error is None:
            body, action = {"lease_token": job["lease_token"], "result": result}, "complete"
        else:
            body, action = {"lease_token": job["lease_token"], "error": error, "retryable": False}, "fail"
        done = self.http.post(f"{self.url}/jobs/{job['id']}/{action}", json=body)
        assert done.status_code == 200, done.text
        return job["id"]

    def later(self, delay: float, **outcome) -> None:
        """``finish`` in a thread, after ``delay`` seconds."""

        def run() -> None:
            time.sleep(delay)
            self.finish(**outcome)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def close(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)
        self.http.close()


@pytest.fixture
def fake_worker(served) -> Iterator[FakeWorker]:
    worker = FakeWorker(served.url, served.worker_key())
    yield worker
    worker.close()
