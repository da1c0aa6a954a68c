"""Configuration: defaults, then ``QUEUELOG_*`` variables from the environment, then test overrides."""

from __future__ import annotations

import os
import re
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

from queuelog.paths import make_private_folder

# name -> (default, parser). Every key is read from QUEUELOG_<NAME>.
_INT = int


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _float(value: str) -> float:
    return float(value)


_PASSWORD_HASH = re.compile(r"scrypt(:\d+){0,3}|pbkdf2(:sha(256|512)(:\d+)?)?")


def password_hash_method(value: str) -> str:
    """A werkzeug hash method for new passwords: ``scrypt[:n[:r[:p]]]`` or ``pbkdf2[:sha256|sha512[:iterations]]``.
    Stored hashes name their own method, so changing it leaves every password that was set before working."""
    value = value.strip()
    if not _PASSWORD_HASH.fullmatch(value):
        raise ValueError(
            f"QUEUELOG_PASSWORD_HASH: not a password hash method: {value!r} "
            "(use scrypt, scrypt:N:R:P, pbkdf2:sha256 or pbkdf2:sha256:ITERATIONS)"
        )
    return value


DEFAULTS: dict[str, tuple[Any, Any]] = {
    "DATABASE_URL": (None, str),  # None: a SQLite file in the instance folder
    "SECRET_KEY": (None, str),  # None: generated once into the instance folder
    "LEASE_SECONDS": (300, _INT),
    "MAX_PAYLOAD_BYTES": (65536, _INT),
    "MAX_REQUEST_BYTES": (1024 * 1024, _INT),
    "MAX_PAYLOAD_DEPTH": (32, _INT),
    "RETRY_BACKOFF_BASE": (2.0, _float),
    "RETRY_BACKOFF_MAX": (3600.0, _float),
    "JOB_TYPES": ("email,pdf,sync", str),
    "ADMIN_PASSWORD": (None, str),
    # How new passwords are hashed (werkzeug): scrypt, slow on purpose. The test suite sets a cheap one
    # (pbkdf2:sha256:1, tests/conftest.py); a production server keeps the default.
    "PASSWORD_HASH": ("scrypt", password_hash_method),
    "SESSION_COOKIE_SECURE": (False, _bool),
    "DB_POOL_SIZE": (10, _INT),
    "DB_MAX_OVERFLOW": (20, _INT),
    "SQLITE_BUSY_TIMEOUT_MS": (30000, _INT),
    "AUTO_UPGRADE": (None, _bool),  # None: upgrade SQLite by itself, never PostgreSQL
    "LONG_POLL_INTERVAL": (0.2, _float),
    "MAX_SNOOZES": (50, _INT),  # how often one job may be snoozed (docs/running-jobs.md)
    "RETENTION": (None, str),  # e.g. "7d": prune finished jobs older than this on a schedule
    "PRUNE_INTERVAL": (3600.0, _float),
    "SCHEDULE_TICK": (1.0, _float),  # seconds between looks for due schedules (0: this process never fires)
    "METRICS_TOKEN": (None, str),  # a bearer token that may read /metrics (admins' keys may too)
    # A login lasts at most SESSION_LIFETIME, and ends sooner when no page is asked for in SESSION_IDLE.
    "SESSION_LIFETIME": ("12h", str),
    "SESSION_IDLE": ("2h", str),
    # How many reverse proxies stand in front of the app (each appends to X-Forwarded-For).
    "TRUSTED_PROXIES": (0, _INT),
    # The console: candidates one search page examines at most; seconds one step of a bulk action works.
    "SEARCH_SCAN": (10000, _INT),
    "BULK_STEP_SECONDS": (2.0, _float),
}
DURATIONS = ("SESSION_LIFETIME", "SESSION_IDLE")


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s`` or plain seconds, as a timedelta."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 45s)")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    return timedelta(seconds=float(match.group(1)) * unit)


def load_config(instance_path: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the QUEUELOG_* settings as a dict of plain Python values."""
    config: dict[str, Any] = {}
    for name, (default, parse) in DEFAULTS.items():
        raw = os.environ.get(f"QUEUELOG_{name}")
        config[name] = parse(raw) if raw not in (None, "") else default
    if overrides:
        config.update(overrides)
    for name in DURATIONS:
        if not isinstance(config[name], timedelta):
            config[name] = parse_duration(str(config[name]))
    config["PASSWORD_HASH"] = password_hash_method(str(config["PASSWORD_HASH"]))
    if not config["DATABASE_URL"] or not config["SECRET_KEY"]:
        make_private_folder(Path(instance_path))  # 0700: it holds the database and the secret key
    if not config["DATABASE_URL"]:
        config["DATABASE_URL"] = "sqlite:///" + str(Path(instance_path) / "queuelog.sqlite3")
    if not config["SECRET_KEY"]:
        config["SECRET_KEY"] = _instance_secret(Path(instance_path))
    return config


def _instance_secret(instance: Path) -> str:
    """Read the secret key kept in the instance folder, making it on first use.

    The file is created 0600 (never readable by others, not even for a moment) and appears atomically (a
    hard link) so that processes starting together agree on one key.
    """
    path = instance / "secret_key"
    if not path.exists():
        tmp = instance / f".secret_key.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
            os.link(tmp, path)  # atomic: fails if another process won the race
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()
