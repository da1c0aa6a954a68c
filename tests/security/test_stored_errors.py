"""Worker errors as Queue.fail stores them (V-10): cut to 4 x 4,096 characters, redacted, cut to 4,096."""

from __future__ import annotations

from queuelog.redact import MASK as R


def _fail_with(producer, worker, admin, error: str) -> str:
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    response = worker.post(
        f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": error}
    )
    assert response.status_code == 200, response.json
    return admin.get(f"/jobs/{job['id']}").json["error"]


def test_a_secret_across_the_4096_character_cut_is_masked_whole(producer, worker, admin):
    filler = "y " * 2045  # 4,090 characters
    stored = _fail_with(producer, worker, admin, filler + "token=abcdefghijklmnopqrstuvwxyz\nrest")
    assert stored == (filler + f"token={R}")[:4096]
    assert "abc" not in stored
    stored = _fail_with(producer, worker, admin, filler + "-----BEGIN PRIVATE KEY-----\n" + "M" * 20_000)
    assert stored == filler + R[:6]
    assert "BEGIN" not in stored and "MMM" not in stored


def test_redaction_sees_the_first_16384_characters_only(producer, worker, admin):
    # A masked key block shrinks the text, so what lies beyond the first 4 x 4,096 raw characters
    # would reach the stored 4,096 if it were looked at; it is not: the raw error is cut first.
    block = "-----BEGIN PRIVATE KEY-----\n" + "M" * 16_000 + "\n-----END PRIVATE KEY-----"
    filler = "a" * (4 * 4096 - len(block))  # the cut falls right after it
    after = "-----BEGIN PRIVATE KEY-----\nNNN\n-----END PRIVATE KEY----- tail"
    assert _fail_with(producer, worker, admin, block + filler + after) == R + filler


def test_nul_and_lone_surrogates_are_still_replaced(producer, worker, admin):
    stored = _fail_with(producer, worker, admin, "a\x00b \ud800 password=x\x00y")
    assert stored == f"a\ufffdb ? password={R}"
