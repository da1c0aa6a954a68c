"""Redaction of worker errors (V-10): secrets go, the rest of the message stays readable."""

import pytest

from queuelog.redact import redact_error


@pytest.mark.parametrize(
    "text,secret",
    [
        ("connect postgres://app:hunter2@db/prod failed", "hunter2"),
        ("password=tr0ub4dor next", "tr0ub4dor"),
        ("db_password: s3cr3t", "s3cr3t"),
        ('{"client_secret": "abc123"}', "abc123"),
        ("X-Api-Key: k-123456", "k-123456"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
        ("used ql_AbCdEfGhIjKlMnOpQrStUv0123456789", "ql_AbCdEfGhIjKlMnOpQrStUv0123456789"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA",
        ),
        ("token=abc&next=1", "abc"),
    ],
)
def test_secrets_are_redacted(text, secret):
    cleaned = redact_error(text)
    assert secret not in cleaned
    assert "[REDACTED]" in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "SMTPAuthError: login failed",
        "PasswordPolicyError: too short",
        "ValueError: invalid literal for int() with base 10: 'abc'",
        "TimeoutError: gave up after 30s",
        "KeyError: 'tokenizer'",
    ],
)
def test_ordinary_errors_are_left_alone(text):
    assert redact_error(text) == text
