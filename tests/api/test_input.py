"""Input rules (docs/api.md#input-rules): bad input gets a clear problem+json error and changes nothing."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

WRITE_ENDPOINTS = [
    "/jobs",
    "/jobs/claim",
    "/jobs/{id}/complete",
    "/jobs/{id}/fail",
    "/jobs/{id}/cancel",
    "/jobs/{id}/retry",
]


def assert_problem(response, status: int, slug: str | None = None):
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True)[:300])
    assert response.headers["Content-Type"] == "application/problem+json"
    body = response.json
    assert set(body) >= {"type", "title", "status", "detail"}
    assert body["status"] == status
    if slug:
        assert body["type"].endswith("/" + slug)
    return body


def test_non_json_content_type_is_415(producer):
    response = producer.post("/jobs", data='{"type": "email"}', headers={"Content-Type": "text/plain"})
    assert_problem(response, 415, "unsupported-media-type")


def test_empty_body_counts_as_empty_object(producer):
    # {} lacks "type": the answer is a validation error about the field, not about the body.
    body = assert_problem(producer.post("/jobs", data=b""), 422, "validation-failed")
    assert body["errors"] == [{"field": "type", "message": "is required"}]


def test_malformed_json_is_400(producer):
    response = producer.post("/jobs", data="{not json", headers={"Content-Type": "application/json"})
    assert_problem(response, 400, "malformed-json")


@pytest.mark.parametrize("text", ["NaN", '{"type": "email", "payload": {"x": Infinity}}', "\xff\xfe"])
def test_non_standard_json_is_400(producer, text):
    response = producer.post(
        "/jobs", data=text.encode("latin-1"), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 400, "malformed-json")


@pytest.mark.parametrize("body", ["[]", '"email"', "42", "null"])
def test_top_level_non_object_is_422(producer, body):
    response = producer.post("/jobs", data=body, headers={"Content-Type": "application/json"})
    assert_problem(response, 422, "validation-failed")


def test_unknown_fields_are_named(producer):
    body = assert_problem(producer.post("/jobs", json={"type": "email", "colour": "red", "size": 1}), 422)
    assert [e["field"] for e in body["errors"]] == ["colour", "size"]


def test_a_long_unknown_field_name_is_named_cut(producer):
    long = "k" * 100_000
    response = producer.post("/jobs", json={"type": "email", long: 1, "short": 2})
    body = assert_problem(response, 422)
    assert [e["field"] for e in body["errors"]] == ["k" * 64 + "…", "short"]
    assert len(response.get_data()) < 2_000  # the name is not echoed back whole


def test_a_doubled_slash_in_a_path_is_404_never_a_redirect_to_another_operation(worker):
    """Werkzeug would merge the slashes and redirect ``/jobs//complete`` to ``/jobs/complete``, the batch
    completion: another operation, and an HTML answer."""
    for path in ("/jobs//complete", "/jobs/1//cancel"):
        assert_problem(worker.post(path, json={}), 404)


def test_an_integer_of_more_digits_than_python_converts_is_422_not_malformed(producer):
    def send(digits: int) -> Any:
        body = '{"type": "email", "payload": {"n": -' + "9" * digits + "}}"
        return producer.post("/jobs", data=body, headers={"Content-Type": "application/json"})

    body = assert_problem(send(4301), 422)
    assert body["errors"] == [{"field": "body", "message": "holds an integer of more than 4,300 digits"}]
    assert "sys." not in json.dumps(body)  # no word of Python's own
    kept = send(4300)
    assert kept.status_code == 201 and kept.get_json()["payload"]["n"] == -int("9" * 4300)


def test_a_bad_body_and_a_bad_header_are_named_together(producer, admin):
    for path, body in (
        ("/jobs", {"type": "email", "max_retries": 99}),
        ("/jobs/batch", {"jobs": [{"type": "email", "max_retries": 99}]}),
        ("/batches", {"jobs": [{"type": "email", "max_retries": 99}]}),
    ):
        response = producer.post(path, json=body, headers={"Idempotency-Key": "a\x01"})
        fields = [e["field"] for e in assert_problem(response, 422)["errors"]]
        assert fields[-1] == "Idempotency-Key" and len(fields) == 2, fields
    assert admin.get("/jobs").json["jobs"] == []


def test_worker_id_field_is_refused(producer, worker):
    producer.post("/jobs", json={"type": "email"})
    body = assert_problem(worker.post("/jobs/claim", json={"worker_id": "someone-else"}), 422)
    assert body["errors"][0]["field"] == "worker_id"


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_retries", True),
        ("max_retries", -1),
        ("max_retries", 26),
        ("max_retries", "3"),
        ("max_retries", 2.5),
        ("priority", 3),
        ("priority", "urgent"),
        ("payload", []),
        ("payload", "text"),
        ("type", 7),
        ("type", ""),
        ("idempotency_key", ""),
        ("idempotency_key", "x" * 256),
        ("idempotency_key", "line\nbreak"),
        ("run_at", "tomorrow"),
        ("run_at", "2030-01-01T00:00:00"),
        ("delay_seconds", -5),
        ("delay_seconds", True),
        ("delay_seconds", 10**12),
    ],
)
def test_wrongly_typed_fields_are_422_naming_the_field(producer, field, value):
    body = assert_problem(
        producer.post("/jobs", json={"type": "email", field: value}), 422, "validation-failed"
    )
    assert body["errors"][0]["field"] == field


def test_run_at_and_delay_together_is_422(producer):
    assert_problem(
        producer.post("/jobs", json={"type": "email", "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 1}),
        422,
    )


def test_a_null_run_at_or_delay_counts_as_not_given(producer):
    """Both are nullable: a null one beside the other is no conflict."""
    for body in (
        {"run_at": None, "delay_seconds": 60},
        {"run_at": "2030-01-01T00:00:00Z", "delay_seconds": None},
    ):
        response = producer.post("/jobs", json={"type": "email", **body})
        assert response.status_code == 201, response.get_json()
        assert response.get_json()["available_at"] > response.get_json()["created_at"]  # delayed


def test_payload_over_64_kib_is_422(producer):
    payload = {"blob": "x" * 65536}
    body = assert_problem(producer.post("/jobs", json={"type": "email", "payload": payload}), 422)
    assert body["errors"][0]["field"] == "payload"


def test_payload_at_the_limit_is_accepted(producer):
    filler = 65536 - len('{"blob":""}')
    response = producer.post("/jobs", json={"type": "email", "payload": {"blob": "x" * filler}})
    assert response.status_code == 201


def test_multibyte_payload_size_counts_utf8_bytes(producer):
    payload = {"blob": "é" * 40000}  # 40,000 characters, 80,000 bytes
    assert_problem(producer.post("/jobs", json={"type": "email", "payload": payload}), 422)


def test_request_over_1_mib_is_413(producer):
    response = producer.post(
        "/jobs",
        data=b'{"type": "' + b"x" * (1024 * 1024 + 10) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert_problem(response, 413, "payload-too-large")


def test_payload_nested_deeper_than_32_is_422(producer):
    deep: dict = {}
    node = deep
    for _ in range(32):
        node["a"] = {}
        node = node["a"]
    assert_problem(producer.post("/jobs", json={"type": "email", "payload": deep}), 422)
    shallow: dict = {}
    node = shallow
    for _ in range(31):
        node["a"] = {}
        node = node["a"]
    assert producer.post("/jobs", json={"type": "email", "payload": shallow}).status_code == 201


def test_extremely_deep_json_is_an_error_not_a_crash(producer):
    text = '{"type": "email", "payload": ' + "[" * 200_000 + "]" * 200_000 + "}"
    response = producer.post("/jobs", data=text, headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 422)
    assert response.headers["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize("text", ["a\u0000b", "\ud800"])
def test_strings_that_cannot_be_stored_are_422(producer, text):
    raw = json.dumps({"type": "email", "payload": {"s": text}})  # ensure_ascii: the escapes survive transport
    assert_problem(producer.post("/jobs", data=raw, headers={"Content-Type": "application/json"}), 422)


def test_unicode_payload_round_trips(producer):
    payload = {"名前": "山田 🚀", "ü": ["ß", "\u202e"], "emoji": "👩‍💻"}
    job = producer.post("/jobs", json={"type": "email", "payload": payload}).json
    assert producer.get(f"/jobs/{job['id']}").json["payload"] == payload


def test_complete_result_obeys_payload_limits(producer, worker):
    producer.post("/jobs", json={"type": "email"})
    held = worker.post("/jobs/claim").json
    url = f"/jobs/{held['id']}/complete"
    assert_problem(worker.post(url, json={"lease_token": held["lease_token"], "result": [1]}), 422)
    assert_problem(
        worker.post(url, json={"lease_token": held["lease_token"], "result": {"x": "y" * 70000}}), 422
    )
    assert_problem(worker.post(url, json={"result": {}}), 422)  # lease_token missing
    assert worker.get(f"/jobs/{held['id']}").json["status"] == "running"


def test_fail_error_must_be_a_string_and_is_cut(producer, worker, admin):
    producer.post("/jobs", json={"type": "email"})
    held = worker.post("/jobs/claim").json
    url = f"/jobs/{held['id']}/fail"
    assert_problem(worker.post(url, json={"lease_token": held["lease_token"], "error": 42}), 422)
    assert_problem(
        worker.post(url, json={"lease_token": held["lease_token"], "error": "x", "retryable": "no"}), 422
    )
    ok = worker.post(url, json={"lease_token": held["lease_token"], "error": "e" * 10000})
    assert ok.status_code == 200
    assert len(admin.get(f"/jobs/{held['id']}").json["error"]) == 4096


@pytest.mark.parametrize(
    "body",
    [
        {"lease_seconds": 4},
        {"lease_seconds": 43201},
        {"limit": 0},
        {"limit": 101},
        {"types": "email"},
        {"types": []},
        {"types": [1]},
    ],
)
def test_claim_input_limits(worker, body):
    assert_problem(worker.post("/jobs/claim", json=body), 422)


# -- randomized: nothing escapes as a 5xx, nothing that existed changes -----------------------------


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(12 if depth < 6 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**63, -(2**70), 25, 26, 3])
    if kind == 3:
        return rng.choice([0.5, -1e308, 1e-9])
    if kind in (4, 5, 6, 7):
        return rng.choice(
            [
                "",
                "email",
                "EMAIL",
                "low",
                "critical",
                "x" * rng.choice([1, 255, 256, 5000]),
                "' OR 1=1 --",
                "\u202e\u0000",
                "日本語",
                "🚀" * 10,
                "2030-01-01T00:00:00Z",
                "\ud800",
            ]
        )
    if kind in (8, 9):
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(["type", "payload", "a", "", "键"]): _random_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def _random_body(rng: random.Random) -> tuple[bytes, str]:
    choice = rng.randrange(10)
    fields = [
        "type",
        "payload",
        "priority",
        "max_retries",
        "idempotency_key",
        "run_at",
        "delay_seconds",
        "lease_token",
        "result",
        "error",
        "retryable",
        "types",
        "lease_seconds",
        "limit",
        "worker_id",
        "x",
    ]
    if choice == 0:
        return rng.choice([b"{", b"[1,", b"\xff\xfe", b'{"a":1}{', b"nul", b'"\\ud800"']), "application/json"
    if choice == 1:
        return b'{"type": "email"}', rng.choice(
            ["text/plain", "application/x-www-form-urlencoded", "application/jsonx"]
        )
    if choice == 2:
        depth = rng.choice([33, 100, 5000])
        return (
            b'{"type":"email","payload":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
        ), "application/json"
    if choice == 3:
        return b'{"type":"email","payload":{"big":"' + b"x" * rng.choice(
            [70000, 2_000_000]
        ) + b'"}}', "application/json"
    body = {rng.choice(fields): _random_value(rng) for _ in range(rng.randrange(1, 6))}
    if rng.random() < 0.5:
        body["type"] = rng.choice(["email", "pdf", "nope"])
    return json.dumps(body, ensure_ascii=rng.random() < 0.5).encode(
        "utf-8", "surrogatepass"
    ), "application/json"


def test_randomized_bad_input_never_5xx_and_changes_nothing(app, producer, worker, admin):
    # Jobs in every interesting state, to be compared before and after the storm.
    for i in range(4):
        producer.post("/jobs", json={"type": "email", "payload": {"n": i}})
    held = worker.post("/jobs/claim").json
    queue = app.extensions["queuelog"]["queue"]
    before = {j["id"]: j for j in queue.list_jobs(limit=1000)}
    valid_ids = sorted(before)

    rng = random.Random(20261129)
    callers = [producer, worker, admin]
    for _ in range(400):
        endpoint = rng.choice(WRITE_ENDPOINTS).format(id=rng.choice([*valid_ids, 0, 424242]))
        data, content_type = _random_body(rng)
        caller = rng.choice(callers)
        response = caller.post(endpoint, data=data, headers={"Content-Type": content_type})
        assert response.status_code < 500, (endpoint, data[:200], response.get_data(as_text=True)[:300])
        if response.status_code >= 400:
            assert response.headers["Content-Type"] == "application/problem+json", (endpoint, data[:200])
            assert response.json["status"] == response.status_code

    after = {j["id"]: j for j in queue.list_jobs(limit=1000)}
    for job_id, job in before.items():
        # The random bodies may legitimately enqueue new jobs or act on held ones with a guessed token
        # (they can't: tokens are 128 random bits); existing jobs' data must be intact.
        assert after[job_id]["payload"] == job["payload"]
        assert after[job_id]["type"] == job["type"]
    assert after[held["id"]]["status"] == "running"
    assert after[held["id"]]["lease_token"] == held["lease_token"]
