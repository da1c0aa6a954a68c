"""Settings: defaults, then ``QUEUELOG_*`` variables from the environment, then the overrides given to
``create_app``; each value is checked against its type and range once, at start-up, into one frozen
``Settings`` (docs/configuration.md, "Settings").

A bad value stops start-up with one line that names the variable, the value and what it accepts; a
``QUEUELOG_*`` variable that is neither a setting nor one of ``OTHER_VARIABLES`` is a warning that names the
closest known name. New code reads a setting as an attribute (``settings.lease_seconds``); the mapping form
(``app.config["QUEUELOG"]["LEASE_SECONDS"]``) reads the same object.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from queuelog.access.refusals import PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, check_password
from queuelog.inputs import TYPE_NAME_PATTERN
from queuelog.paths import make_private_folder

PREFIX = "QUEUELOG_"

# QUEUELOG_* variables that are not settings of the app but are read by name elsewhere: the instance folder
# (queuelog/paths.py), gunicorn's settings (queuelog/gunicorn_conf.py), the worker client, the test suite,
# and the key docs/client.md's example keeps in the shell. None of them is warned about.
OTHER_VARIABLES = frozenset(
    {
        "QUEUELOG_INSTANCE_PATH",
        "QUEUELOG_BIND",
        "QUEUELOG_THREADS",
        "QUEUELOG_ACCESS_LOG",
        "QUEUELOG_URL",
        "QUEUELOG_WORKER_KEY",
        "QUEUELOG_KEY",
        "QUEUELOG_TEST_POSTGRES_URL",
        "QUEUELOG_TEST_POSTGRES_SCHEMA",
        "QUEUELOG_REQUIRE_BROWSER",
        "QUEUELOG_PG_BIN",
        "QUEUELOG_SCREENSHOT_DIR",
    }
)


class SettingError(ValueError):
    """A setting's value is not one it accepts; ``str()`` is the one line start-up prints."""


MAX_DURATION = timedelta(days=36_500)  # a century: longer spans are typing slips, and overflow dates


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s`` or plain seconds, as a timedelta of at most a century."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 45s)")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    seconds = float(match.group(1)) * unit
    if not seconds <= MAX_DURATION.total_seconds():  # also inf, from a number of 309 digits
        raise ValueError(f"too long a duration: {text.strip()!r} (at most {MAX_DURATION.days:,}d)")
    return timedelta(seconds=seconds)


# The kinds of value. Each reads a variable's text or an override's value (which may already be typed: an
# int, a float, a bool, a timedelta), returns the typed value or raises ValueError, and says in ``accepts``
# what it takes: the words of the start-up error and of the table in docs/configuration.md.


@dataclass(frozen=True)
class Integer:
    low: int
    high: int | None = None

    @property
    def accepts(self) -> str:
        if self.high is None:
            return f"an integer of at least {self.low}"
        return f"an integer from {self.low} to {self.high}"

    def __call__(self, value: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(value)
        if value < self.low or (self.high is not None and value > self.high):
            raise ValueError(value)
        return value


@dataclass(frozen=True)
class Seconds:
    """A number of seconds (a fraction is fine): at least ``low``, or above it with ``above``."""

    low: float = 0.0
    above: bool = False

    @property
    def accepts(self) -> str:
        low = f"{self.low:g}"
        return f"a number of seconds above {low}" if self.above else f"a number of seconds of at least {low}"

    def __call__(self, value: Any) -> float:
        if isinstance(value, str):
            value = float(value)  # ValueError for words
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(value)
        if value < self.low or (self.above and value == self.low):
            raise ValueError(value)
        return float(value)


TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Boolean:
    accepts = "true or false (also 1/0, yes/no, on/off)"

    def __call__(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        word = value.strip().lower() if isinstance(value, str) else None
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(value)


@dataclass(frozen=True)
class Choice:
    """One of a few words."""

    words: tuple[str, ...]

    @property
    def accepts(self) -> str:
        return "one of " + ", ".join(self.words)

    def __call__(self, value: Any) -> str:
        word = value.strip().lower() if isinstance(value, str) else None
        if word not in self.words:
            raise ValueError(value)
        return word


@dataclass(frozen=True)
class Duration:
    """``45s``, ``30m``, ``12h``, ``7d``, ``2w`` or plain seconds; an override may give a timedelta."""

    low: timedelta = timedelta(seconds=1)

    @property
    def accepts(self) -> str:
        return f"a duration (45s, 30m, 12h, 7d, 2w) of at least {_words(self.low)}"

    def __call__(self, value: Any) -> timedelta:
        if isinstance(value, str):
            value = parse_duration(value)
        elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            value = timedelta(seconds=min(value, MAX_DURATION.total_seconds() + 1))  # past it: refused
        if not isinstance(value, timedelta) or not self.low <= value <= MAX_DURATION:
            raise ValueError(value)
        return value


def _words(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class Text:
    accepts: str = "text"

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(value)
        return value


@dataclass(frozen=True)
class TypeNames(Text):
    """Comma-separated job type names, each as the allowlist takes them (queuelog.inputs)."""

    def __call__(self, value: Any) -> str:
        text = super().__call__(value)
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names or not all(re.fullmatch(TYPE_NAME_PATTERN, name) for name in names):
            raise ValueError(value)
        return text


@dataclass(frozen=True)
class Secret(Text):
    """Text the start-up error does not repeat: it would land in logs."""

    def shown(self, value: Any) -> str:
        return "(hidden)"


@dataclass(frozen=True)
class Password(Secret):
    accepts: str = (
        f"a password of {PASSWORD_MIN_LENGTH} to {PASSWORD_MAX_LENGTH} characters, not only whitespace"
    )

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(value)
        check_password(value)  # the rule of every password (a ValueError)
        return value


@dataclass(frozen=True)
class DatabaseUrl:
    accepts = "a SQLAlchemy database URL, e.g. sqlite:///path or postgresql+psycopg://user@host/db"

    def shown(self, value: Any) -> str:
        """The value with the password of ``user:password@`` left out."""
        if not isinstance(value, str) or "@" not in value:
            return repr(value)
        userinfo, at, rest = value.rpartition("@")
        scheme, slashes, user = userinfo.rpartition("://")
        name, colon, _password = user.partition(":")
        return repr(scheme + slashes + name + (colon and ":***") + at + rest)

    def __call__(self, value: Any) -> str:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        if not isinstance(value, str):
            raise ValueError(value)
        try:
            make_url(value)
        except ArgumentError:
            raise ValueError(value) from None
        return value


@dataclass(frozen=True)
class PasswordHash:
    """A werkzeug hash method for new passwords. Stored hashes name their own method, so a change leaves
    every password set before it working."""

    accepts = "a password hash method: scrypt, scrypt:N:R:P, pbkdf2:sha256 or pbkdf2:sha256:ITERATIONS"

    def __call__(self, value: Any) -> str:
        match = _PASSWORD_HASH.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None:
            raise ValueError(value)
        if match["n"] is not None:
            n, r, p = (int(match[key]) for key in "nrp")
            # What hashlib and OpenSSL take: N a power of 2 below 2^(16R), from 1024 (less runs out of
            # OpenSSL's own memory), R and P from 1, and werkzeug's memory bound of 132·N·R·P below 2 GiB.
            if (
                n < 1024
                or n & (n - 1)
                or r < 1
                or p < 1
                or n >= 2 ** (16 * r)
                or 132 * n * r * p >= 2**31 - 1
            ):
                raise ValueError(value)
        if match["iterations"] is not None and not 1 <= int(match["iterations"]) < 2**31:
            raise ValueError(value)
        return value.strip()


_PASSWORD_HASH = re.compile(
    r"scrypt(:(?P<n>\d+):(?P<r>\d+):(?P<p>\d+))?|pbkdf2(:sha(256|512)(:(?P<iterations>\d+))?)?"
)


def setting(default: Any, kind: Callable[[Any], Any]) -> Any:
    """A field of ``Settings``: its default (None: unset, or computed at start-up) and its kind. A value
    that the start-up error hides (a kind with ``shown``) is left out of the repr too."""
    return field(metadata={"default": default, "kind": kind}, repr=not hasattr(kind, "shown"))


@dataclass(frozen=True)
class Settings(Mapping[str, Any]):
    """The app's settings, read once at start-up (``load_settings``) and never changed: as attributes
    (``settings.search_scan``, the form for new code) or as a read-only mapping of the variables' names
    without their prefix (``settings["SEARCH_SCAN"]``), which the app keeps as ``app.config["QUEUELOG"]``.
    The table in docs/configuration.md lists these fields, their defaults and what each accepts."""

    database_url: str = setting(None, DatabaseUrl())  # None: a SQLite file in the instance folder
    secret_key: str = setting(None, Secret())  # None: generated once into the instance folder
    lease_seconds: int = setting(300, Integer(5, 43200))  # the range POST /jobs/claim accepts
    max_payload_bytes: int = setting(65536, Integer(64))
    max_request_bytes: int = setting(1024 * 1024, Integer(1024))
    max_payload_depth: int = setting(32, Integer(1, 200))  # well inside Python's recursion limit
    retry_backoff_base: float = setting(2.0, Seconds(0))  # 0: retry at once
    retry_backoff_max: float = setting(3600.0, Seconds(0))
    job_types: str = setting("email,pdf,sync", TypeNames("comma-separated job type names"))
    admin_password: str | None = setting(None, Password())
    # How new passwords are hashed: scrypt, slow on purpose. The test suite sets a cheap one
    # (pbkdf2:sha256:1, tests/conftest.py); a production server keeps the default.
    password_hash: str = setting("scrypt", PasswordHash())
    session_cookie_secure: bool = setting(False, Boolean())
    db_pool_size: int = setting(10, Integer(1))
    db_max_overflow: int = setting(20, Integer(0))
    sqlite_busy_timeout_ms: int = setting(30000, Integer(0))
    # Riding out the database (docs/operations.md#outages): how long to wait for a connection (new or
    # pooled), how long a statement may run (PostgreSQL's statement_timeout; SQLite's busy timeout and
    # writer's wait at most this; 0: unbounded), and psycopg's prepared statements (off behind PgBouncer
    # in transaction mode).
    db_connect_timeout: float = setting(5.0, Seconds(0, above=True))
    db_statement_timeout: float = setting(30.0, Seconds(0))
    db_prepared_statements: bool = setting(True, Boolean())
    auto_upgrade: bool | None = setting(None, Boolean())  # None: upgrade SQLite by itself, never PostgreSQL
    # Wake-ups of waiting long polls (docs/operations.md#wake-ups): signals between the processes (LISTEN/
    # NOTIFY on PostgreSQL, datagrams on SQLite) and a safety-net probe every WAKEUP_SAFETY_NET seconds;
    # or poll, a probe every LONG_POLL_INTERVAL (PgBouncer in transaction mode).
    wakeups: str = setting("signal", Choice(("signal", "poll")))
    wakeup_safety_net: float = setting(5.0, Seconds(0, above=True))
    long_poll_interval: float = setting(0.2, Seconds(0, above=True))
    # Long polls one process lets wait at once; beyond, a claim that finds nothing answers at once with
    # Retry-After. Keep it below gunicorn's threads (queuelog/gunicorn_conf.py).
    max_waiting_polls: int = setting(500, Integer(0))
    max_snoozes: int = setting(50, Integer(0))  # how often one job may be snoozed (docs/running-jobs.md)
    retention: timedelta | None = setting(None, Duration())  # e.g. 7d: prune finished jobs older than this
    prune_interval: float = setting(3600.0, Seconds(0, above=True))
    schedule_tick: float = setting(1.0, Seconds(0))  # 0: this process never fires schedules
    metrics_token: str | None = setting(None, Secret())  # a bearer token that may read /metrics
    # A login lasts at most SESSION_LIFETIME, and ends sooner when no page is asked for in SESSION_IDLE.
    session_lifetime: timedelta = setting("12h", Duration())
    session_idle: timedelta = setting("2h", Duration())
    # How many reverse proxies stand in front of the app (each appends to X-Forwarded-For).
    trusted_proxies: int = setting(0, Integer(0))
    # The console: candidates one search page examines at most; seconds one step of a bulk action works
    # (0: one window of the search per step).
    search_scan: int = setting(10000, Integer(1))
    bulk_step_seconds: float = setting(2.0, Seconds(0))

    def __getitem__(self, name: str) -> Any:
        if name not in SPECS:
            raise KeyError(name)
        return getattr(self, name.lower())

    def __iter__(self) -> Iterator[str]:
        return iter(SPECS)

    def __len__(self) -> int:
        return len(SPECS)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (by name, e.g. ``SEARCH_SCAN=3``), checked like any override."""
        return Settings(**{name.lower(): value for name, value in {**self, **_checked(changes)}.items()})


@dataclass(frozen=True)
class Spec:
    """One setting: its name (without the prefix), default and kind."""

    name: str
    default: Any
    kind: Any

    @property
    def variable(self) -> str:
        return PREFIX + self.name

    @property
    def accepts(self) -> str:
        return self.kind.accepts


SPECS: dict[str, Spec] = {
    f.name.upper(): Spec(f.name.upper(), f.metadata["default"], f.metadata["kind"])
    for f in dataclasses.fields(Settings)
}


def _check(spec: Spec, value: Any, source: str) -> Any:
    try:
        return spec.kind(value)
    except (ValueError, TypeError):
        shown = getattr(spec.kind, "shown", repr)(value)
        raise SettingError(f"{source}={shown} is not valid: {spec.accepts}") from None


def _checked(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides (``create_app({"QUEUELOG": {...}})``) by name, through the same checks as the
    environment's text. None leaves a setting unset where unset is allowed (its default is None)."""
    values = {}
    for name, value in overrides.items():
        spec = SPECS.get(name)
        if spec is None:
            raise SettingError(f"{name} is not a setting" + _closest(name, SPECS, "; did you mean {}?"))
        values[name] = None if value is None and spec.default is None else _check(spec, value, name)
    return values


def read_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every setting by name, checked: ``QUEUELOG_<NAME>`` from ``environ`` where it is set (empty counts as
    unset), else its default; then ``overrides``. Raises ``SettingError`` at the first bad value."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, spec in SPECS.items():
        raw = environ.get(spec.variable)
        if raw not in (None, ""):
            values[name] = _check(spec, raw, spec.variable)
        elif spec.default is None:
            values[name] = None
        else:
            values[name] = spec.kind(spec.default)
    values.update(_checked(overrides or {}))
    return values


def load_settings(
    instance_path: str, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """The app's ``Settings``: ``read_settings``, then the database URL and the secret key that default
    to the instance folder."""
    values = read_settings(environ, overrides)
    try:
        if not values["DATABASE_URL"] or not values["SECRET_KEY"]:
            make_private_folder(Path(instance_path))  # 0700: it holds the database and the secret key
        if not values["SECRET_KEY"]:
            values["SECRET_KEY"] = _instance_secret(Path(instance_path))
    except OSError as exc:  # a file stands there, or a folder this user may not write in
        raise SettingError(
            f"the instance folder {instance_path} cannot be used: {exc.strerror}"
            " (set QUEUELOG_INSTANCE_PATH to a folder, or QUEUELOG_DATABASE_URL and QUEUELOG_SECRET_KEY)"
        ) from None
    if not values["DATABASE_URL"]:
        values["DATABASE_URL"] = "sqlite:///" + str(Path(instance_path) / "queuelog.sqlite3")
    return Settings(**{name.lower(): value for name, value in values.items()})


KNOWN_VARIABLES = frozenset(spec.variable for spec in SPECS.values()) | OTHER_VARIABLES


def _closest(name: str, known: Any, template: str) -> str:
    match = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return template.format(match[0]) if match else ""


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each ``QUEUELOG_*`` variable of ``environ`` that nothing reads, naming the closest
    known name: a misspelt setting would otherwise be ignored without a word."""
    environ = os.environ if environ is None else environ
    return [
        f"{name} is not a queuelog setting and is ignored"
        + _closest(name, KNOWN_VARIABLES, "; did you mean {}?")
        + " (docs/configuration.md)"
        for name in sorted(environ)
        if name.startswith(PREFIX) and name not in KNOWN_VARIABLES
    ]


_warned: set[str] = set()  # a process warns once about each name (gunicorn's workers inherit the master's)


def warn_unknown_variables(warn: Callable[[str], Any], environ: Mapping[str, str] | None = None) -> None:
    """Pass each warning of ``unknown_variables`` to ``warn``, once per process."""
    for message in unknown_variables(environ):
        if message not in _warned:
            _warned.add(message)
            warn(message)


def check_environment(warn: Callable[[str], Any]) -> None:
    """For a process that starts without building the app (gunicorn's master, which reads its settings
    before it forks the workers): a bad value exits with the one line; unknown names are warned about."""
    try:
        read_settings()
    except SettingError as exc:
        raise SystemExit(f"queuelog: {exc}") from None
    warn_unknown_variables(warn)


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
