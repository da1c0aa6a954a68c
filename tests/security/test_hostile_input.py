"""Hostile input, attack by attack: each request here once made the server answer 5xx, leak, or misbehave.

Every test runs on SQLite and, when its URL is set, on PostgreSQL (the ``backend`` fixture).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from queuelog import create_app
from queuelog.models import User
from queuelog.queue import JobSpec, Queue
from queuelog.queue.admin import AdminStore
from tests.conftest import ADMIN_PASSWORD, ROOT

SURROGATE = "\udfff"


def _enqueue(producer, **body) -> dict:
    response = producer.post("/jobs", json={"type": "email", **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def _claimed(producer, worker) -> dict:
    _enqueue(producer)
    response = worker.post("/jobs/claim", json={})
    assert response.status_code == 200
    return response.get_json()


# -- text that cannot be stored -------------------------------------------------------------------


@pytest.mark.parametrize("bad", [SURROGATE, "ab\x00cd"])
def test_unstorable_lease_tokens_are_422_on_every_report(producer, worker, bad):
    job = _claimed(producer, worker)
    for path, body in [
        (f"/jobs/{job['id']}/complete", {"lease_token": bad}),
        (f"/jobs/{job['id']}/heartbeat", {"lease_token": bad}),
        (f"/jobs/{job['id']}/fail", {"lease_token": bad, "error": "x"}),
        ("/jobs/complete", {"jobs": [{"id": job["id"], "lease_token": bad}]}),
    ]:
        response = worker.post(path, json=body)
        assert response.status_code == 422, (path, response.get_json())
        assert response.get_json()["errors"][0]["field"].endswith("lease_token")
    # The job is untouched: still held, and the real token still completes it.
    done = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"]})
    assert done.get_json()["status"] == "completed"


def test_nul_in_page_query_and_login_form_is_a_clear_400(client, browser, keys):
    keys.raw("producer", "alice")
    response = browser.submit("/login", username="ali\x00ce", password="password-alice")
    assert response.status_code == 400
    assert "username" in response.get_data(as_text=True)
    assert browser.login("alice", "password-alice").status_code == 302
    listed = browser.get("/queue?type=%00")
    assert listed.status_code == 400
    assert "cannot be used" in listed.get_data(as_text=True)


def test_unicode_digits_are_not_ids_or_numbers(producer, admin_browser):
    job = _enqueue(producer)
    assert producer.get("/jobs/\u0661").status_code == 404  # ARABIC-INDIC DIGIT ONE
    assert producer.get(f"/jobs/{job['id']}").status_code == 200
    assert producer.get("/jobs?limit=\u00b2").status_code == 422
    page = admin_browser.get("/queue?before=\u00b2")
    assert page.status_code == 200 and f"#{job['id']}<" in page.get_data(as_text=True)


# -- the submit form ------------------------------------------------------------------------------


def test_submit_with_a_payload_nested_5000_deep_is_an_error_beside_the_field(queue, producer_browser):
    deep = "[" * 5000 + "]" * 5000
    payload = '{"a": ' + deep + "}"
    response = producer_browser.submit(
        "/submit", type="email", payload=payload, priority="low", max_retries=3
    )
    assert response.status_code == 422
    assert "nested too deeply" in response.get_data(as_text=True)
    assert queue.list_jobs(owner="alice", limit=5) == []


def test_submit_with_a_start_time_past_year_9999_in_a_western_zone_is_an_error(app, queue, producer_browser):
    db = app.extensions["queuelog"]["db"]
    with db.session() as s:
        alice = s.query(User).filter_by(username="alice").one()
    AdminStore(db).set_preferences(alice.id, timezone="America/Los_Angeles")
    response = producer_browser.submit(
        "/submit", type="email", payload="{}", priority="low", max_retries=3, run_at="9999-12-31T23:00"
    )
    assert response.status_code == 422
    assert "Enter a valid start time." in response.get_data(as_text=True)
    assert queue.list_jobs(owner="alice", limit=5) == []


# -- time zones -----------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", ["Factory", "localtime", "posixrules"])
def test_zones_nobody_lives_in_are_refused_and_a_saved_one_does_no_harm(app, producer_browser, zone):
    producer_browser.submit("/settings", action="/timezone", timezone=zone)
    page = producer_browser.get("/settings")
    assert page.status_code == 200
    assert f'value="{zone}" selected' not in page.get_data(as_text=True)
    # A zone saved before this check existed: the pages fall back to UTC instead of failing.
    db = app.extensions["queuelog"]["db"]
    with db.session() as s:
        alice = s.query(User).filter_by(username="alice").one()
    AdminStore(db).set_preferences(alice.id, timezone=zone)
    assert producer_browser.get("/").status_code == 200
    assert producer_browser.get("/settings").status_code == 200


# -- job type schemas -----------------------------------------------------------------------------


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text('{"type": "string", "description": "TOP-SECRET-FILE-CONTENT"}')
    return path


@pytest.fixture
def listener():
    """A TCP socket on 127.0.0.1 that records whether anyone connected to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(5)
    sock.settimeout(0.5)
    seen: list[bool] = []

    def accept():
        try:
            conn, _ = sock.accept()
            seen.append(True)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1], seen, thread
    sock.close()


def test_a_schema_ref_is_never_fetched_when_enqueueing(queue, producer, secret_file, listener):
    port, seen, thread = listener
    # Saved behind the checks' back (as a type made before them would be): enqueueing must not fetch.
    queue.types.add("leaky", "", {"type": "object", "properties": {"x": {"$ref": secret_file.as_uri()}}})
    queue.types.add("remote", "", {"$ref": f"http://127.0.0.1:{port}/schema.json"})
    leaky = producer.post("/jobs", json={"type": "leaky", "payload": {"x": 5}})
    assert leaky.status_code == 422
    assert "TOP-SECRET" not in leaky.get_data(as_text=True)
    remote = producer.post("/jobs", json={"type": "remote", "payload": {}})
    assert remote.status_code == 422
    thread.join(1)
    assert seen == []


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ('{"$ref": "file:///etc/passwd"}', "refers to another document"),
        ('{"$ref": "http://127.0.0.1:9/x.json"}', "refers to another document"),
        ('{"$ref": "#/$defs/missing"}', "points at nothing"),
        ('{"description": "a\\u0000b"}', "cannot be stored"),
        ('{"description": "a\\udfffb"}', "cannot be stored"),
        ('{"items": ' * 40 + "{}" + "}" * 40, "nested more than 32 levels"),
        ('{"items": ' * 3000 + "{}" + "}" * 3000, "nested more than 32 levels"),
    ],
)
def test_unusable_schemas_are_refused_beside_the_field(queue, admin_browser, schema, message):
    response = admin_browser.submit("/admin/types", name="risky", description="", payload_schema=schema)
    assert response.status_code == 422
    assert message in response.get_data(as_text=True)
    assert "risky" not in [t.name for t in queue.types.all()]


def test_a_local_ref_schema_is_accepted_and_applied(queue, admin_browser, producer):
    schema = {
        "$defs": {"to": {"type": "string"}},
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/to"}},
    }
    response = admin_browser.submit(
        "/admin/types", name="mail", description="", payload_schema=json.dumps(schema)
    )
    assert response.status_code == 302
    assert producer.post("/jobs", json={"type": "mail", "payload": {"to": "ada"}}).status_code == 201
    refused = producer.post("/jobs", json={"type": "mail", "payload": {"to": 5}})
    assert refused.status_code == 422 and refused.get_json()["errors"][0]["field"] == "payload.to"


def test_nul_in_a_type_description_is_refused(queue, admin_browser):
    response = admin_browser.submit("/admin/types", name="nul", description="a\x00b", payload_schema="")
    assert response.status_code == 400
    assert "nul" not in [t.name for t in queue.types.all()]


def test_cli_refuses_a_schema_with_a_remote_ref(runner, tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text('{"$ref": "https://example.com/s.json"}')
    result = runner.invoke(args=["types", "add", "remote", "--schema", str(schema)])
    assert result.exit_code != 0
    assert "only references within the schema" in result.output


# -- numbers that grow when PostgreSQL stores them ------------------------------------------------


def test_payload_limit_counts_numbers_as_stored(producer, worker):
    # 54 KB as sent; as jsonb prints them, each 1e308 is 309 digits: 2.8 MB stored and served.
    huge = producer.post("/jobs", json={"type": "email", "payload": {"n": [1e308] * 9000}})
    assert huge.status_code == 422
    assert "bytes serialized" in huge.get_json()["errors"][0]["message"]
    # A few such numbers fit, and read back no larger than the limit on either engine.
    job = _enqueue(producer, payload={"n": [1e308] * 100, "tiny": 1.5e-300})
    claimed = worker.post("/jobs/claim", json={}).get_json()
    assert claimed["id"] == job["id"]
    # jsonb hands back exact decimals (10**308 as an integer): the same number, written out in full.
    assert float(claimed["payload"]["n"][0]) == 1e308 and claimed["payload"]["tiny"] == 1.5e-300
    assert len(json.dumps(claimed["payload"])) < 65536


# -- expired leases are claimable by the claim that settles them ---------------------------------


def test_the_claim_that_expires_a_lease_hands_the_job_out(app):
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    q = Queue(app.extensions["queuelog"]["db"], lease_seconds=30, backoff_base=0, clock=lambda: now[0])
    payload = {"n": 1}
    job, _ = q.enqueue("alice", JobSpec(type="email", payload=payload, payload_json=json.dumps(payload)))
    first = q.claim("w1")[0]
    now[0] += timedelta(seconds=31)
    again = q.claim("w2")
    assert [j["id"] for j in again] == [job["id"]]
    assert again[0]["retry_count"] == 1 and again[0]["worker_id"] == "w2"
    events = [(e["event"], e["actor"]) for e in q.events(job["id"])]
    assert events == [
        ("enqueued", "alice"),
        ("claimed", "w1"),
        ("lease_expired", "system"),
        ("claimed", "w2"),
    ]
    assert first["lease_token"] != again[0]["lease_token"]


# -- what workers learn about jobs they do not hold ----------------------------------------------


def test_a_worker_probing_jobs_learns_nothing_of_their_state(producer, worker, keys):
    other = keys.worker("worker-2")
    pending = _enqueue(producer)
    held = _claimed(producer, other)
    completed = _claimed(producer, other)
    other.post(f"/jobs/{completed['id']}/complete", json={"lease_token": completed["lease_token"]})
    details = set()
    for job in (pending, held, completed):
        response = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": "guess"})
        assert response.status_code == 409
        details.add(response.get_json()["detail"].replace(str(job["id"]), "N"))
    assert len(details) == 1
    detail = details.pop()
    assert not any(word in detail for word in ("pending", "running", "completed"))


# -- request bodies -------------------------------------------------------------------------------


def test_compressed_bodies_are_415(producer):
    response = producer.post(
        "/jobs",
        data=b"\x1f\x8b\x08\x00",
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 415


def test_chunked_bodies_over_the_limit_are_413(live_server, keys):
    server = live_server(workers=1, threads=2)
    key = keys.raw("producer", "alice")
    filler = "x" * 60000

    def send(chunks: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        body = json.dumps({"type": "email", "payload": {f"k{i}": filler for i in range(chunks)}}).encode()
        pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
        try:
            try:
                conn.request(
                    "POST",
                    "/jobs",
                    body=pieces,
                    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                    encode_chunked=True,
                )
            except (BrokenPipeError, ConnectionResetError):
                # The server answered once it had read past the limit and closed without reading the rest
                # (gunicorn drains at most 64 KiB of a body the app left); its answer is still readable.
                pass
            return conn.getresponse().status
        finally:
            conn.close()

    assert send(20) == 413  # 1.2 MB, no Content-Length
    assert send(1) == 201


def test_idempotency_key_header_is_read_as_utf8(producer):
    raw = "clé-ß".encode().decode("latin-1")  # the bytes as WSGI hands them over
    response = producer.post("/jobs", json={"type": "email"}, headers={"Idempotency-Key": raw})
    assert response.status_code == 201
    assert response.get_json()["idempotency_key"] == "clé-ß"


def test_batch_with_an_idempotency_key_header_replays_whole(producer):
    body = {"jobs": [{"type": "email", "payload": {"n": n}} for n in range(3)]}
    first = producer.post("/jobs/batch", json=body, headers={"Idempotency-Key": "nightly-2030-01-01"})
    assert first.status_code == 201
    again = producer.post("/jobs/batch", json=body, headers={"Idempotency-Key": "nightly-2030-01-01"})
    assert again.status_code == 200
    assert [j["id"] for j in again.get_json()["jobs"]] == [j["id"] for j in first.get_json()["jobs"]]
    body["jobs"][1]["payload"] = {"n": 99}
    changed = producer.post("/jobs/batch", json=body, headers={"Idempotency-Key": "nightly-2030-01-01"})
    assert changed.status_code == 422
    assert changed.get_json()["type"].endswith("idempotency-key-reused")
    assert len(producer.get("/jobs").get_json()["jobs"]) == 3


def test_a_batch_replayed_with_body_keys_answers_200(producer):
    body = {"jobs": [{"type": "email", "idempotency_key": f"k{n}"} for n in range(2)]}
    assert producer.post("/jobs/batch", json=body).status_code == 201
    assert producer.post("/jobs/batch", json=body).status_code == 200


def test_api_answers_and_pages_are_not_stored_in_caches(producer, admin_browser):
    assert producer.get("/jobs").headers["Cache-Control"] == "no-store"
    assert producer.post("/jobs", json={}).headers["Cache-Control"] == "no-store"
    created = admin_browser.submit("/admin/keys", name="w-9", kind="worker", user="")
    assert "ql_" in created.get_data(as_text=True)
    assert created.headers["Cache-Control"] == "no-store"
    static = admin_browser.get("/static/style.css")
    static.close()
    assert "no-store" not in static.headers.get("Cache-Control", "")


# -- logs and start-up ----------------------------------------------------------------------------


def test_database_errors_do_not_carry_bound_parameters(app):
    db = app.extensions["queuelog"]["db"]
    with pytest.raises(Exception) as caught:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT :secret FROM no_such_table"), {"secret": "hunter2-lease-token"})
    assert "hunter2" not in str(caught.value)


def test_start_up_needs_no_write_lock_on_a_started_database(app, backend, database_url, tmp_path):
    if backend.name != "sqlite":
        pytest.skip("SQLite-only: PostgreSQL has no database-wide write lock")
    holder = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    try:
        second = create_app(
            {
                "TESTING": True,
                "QUEUELOG": {
                    "DATABASE_URL": database_url,
                    "SECRET_KEY": "k",
                    "ADMIN_PASSWORD": ADMIN_PASSWORD,
                    "SQLITE_BUSY_TIMEOUT_MS": 200,
                },
            }
        )
        assert second.test_client().get("/healthz").status_code == 200
        second.extensions["queuelog"]["db"].dispose()
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.slow  # starts the server in subprocesses
def test_a_database_path_that_can_never_work_exits_with_one_line(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database's folder should be")
    env = {"QUEUELOG_DATABASE_URL": f"sqlite:///{blocker}/queuelog.sqlite3", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "routes"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert lines[-1].startswith(f"queuelog: cannot use the database {blocker}/queuelog.sqlite3: ")


# -- found by a review after the first round -------------------------------------------------------


def test_schema_checks_stay_linear_and_never_fail_with_500(queue, producer):
    queue.types.add(
        "tagged", "", {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    )
    queue.types.add("lines", "", {"type": "object", "properties": {"lines": {"items": {"type": "string"}}}})
    queue.types.add("money", "", {"type": "object", "properties": {"amount": {"multipleOf": 0.01}}})
    # 6,000 distinct small objects: the library's pairwise comparison took minutes; ours is linear.
    tags = [{"a": n} for n in range(6000)]
    assert producer.post("/jobs", json={"type": "tagged", "payload": {"tags": tags}}).status_code == 201
    dup = producer.post("/jobs", json={"type": "tagged", "payload": {"tags": [*tags, {"a": 3.0}]}})
    assert dup.status_code == 422 and dup.get_json()["errors"][0]["message"].endswith("…")
    assert dup.get_json()["errors"][0]["message"].startswith('[{"a":0},')  # the validator's own words
    assert len(dup.get_data()) < 2000  # the answer does not echo the whole array
    assert producer.post("/jobs", json={"type": "tagged", "payload": {"tags": [1, True]}}).status_code == 201
    wrong = producer.post("/jobs", json={"type": "lines", "payload": {"lines": [0] * 30000}})
    assert wrong.status_code == 422 and wrong.get_json()["errors"][0]["field"] == "payload.lines[0]"
    body = b'{"type": "money", "payload": {"amount": 1' + b"0" * 400 + b"}}"
    huge = producer.post("/jobs", data=body, headers={"Content-Type": "application/json"})
    assert huge.status_code == 201 and huge.get_json()["payload"] == {"amount": 10**400}  # compared exactly
    body = b'{"type": "money", "payload": {"amount": 1' + b"0" * 399 + b"1}}"  # exact, not a double
    assert producer.post("/jobs", data=body, headers={"Content-Type": "application/json"}).status_code == 201
    assert producer.post("/jobs", json={"type": "money", "payload": {"amount": 0.015}}).status_code == 422


@pytest.mark.parametrize("schema", ['{"maximum": NaN}', '{"maximum": Infinity}', '{"maximum": 1e400}'])
def test_schemas_with_numbers_json_cannot_hold_are_refused(queue, admin_browser, schema):
    response = admin_browser.submit("/admin/types", name="nan", description="", payload_schema=schema)
    assert response.status_code == 422 and "must be finite" in response.get_data(as_text=True)
    assert "nan" not in [t.name for t in queue.types.all()]


def test_nul_in_a_path_segment_is_a_clear_400(admin_browser):
    for path in ("/admin/keys/a%00b/revoke", "/admin/users/a%00b/role", "/admin/types/a%00b/pause"):
        response = admin_browser.submit("/admin/keys", path, role="admin")
        assert response.status_code == 400, path


def test_names_with_a_slash_can_be_managed_from_the_pages(admin_browser, app):
    from queuelog.queue.admin import AdminStore

    created = admin_browser.submit("/admin/keys", name="team/a", kind="worker", user="")
    key = re.search(r'id="new-key">(ql_[^<]+)<', created.get_data(as_text=True)).group(1)
    assert admin_browser.submit("/admin/keys", "/admin/keys/team/a/revoke").status_code == 302
    assert AdminStore(app.extensions["queuelog"]["db"]).authenticate(key) is None


def test_malformed_chunked_bodies_are_400(live_server, keys):
    server = live_server(workers=1, threads=2)
    key = keys.raw("producer", "alice")
    for path, auth in (("/jobs", f"Authorization: Bearer {key}\r\n"), ("/login", "")):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n".encode()
            )
            status_line = sock.makefile("rb").readline().decode()
        assert status_line.split()[1] == "400", (path, status_line)


def test_logging_out_keeps_the_chosen_language(producer_browser):
    producer_browser.submit("/settings", action="/language", locale="de")
    page = producer_browser.submit("/", action="/logout")
    assert page.status_code == 302
    login = producer_browser.get("/login").get_data(as_text=True)
    assert 'lang="de"' in login and "Du bist abgemeldet." in login


def test_a_batch_may_not_use_one_key_twice(producer):
    body = {
        "jobs": [{"type": "email", "idempotency_key": "same"}, {"type": "pdf", "idempotency_key": "same"}]
    }
    response = producer.post("/jobs/batch", json=body)
    assert response.status_code == 422
    assert response.get_json()["errors"][0]["field"] == "jobs[1].idempotency_key"
    assert producer.get("/jobs").get_json()["jobs"] == []


def test_the_worker_redacts_a_traceback_before_cutting_it():
    from queuelog.worker.runner import MAX_ERROR_CHARS, _traceback

    try:
        raise RuntimeError("could not connect to postgresql://app:S3cretDbPass@db:5432/app; " + "x" * 4043)
    except RuntimeError:
        text = _traceback()
    assert "S3cret" not in text and len(text) <= MAX_ERROR_CHARS
