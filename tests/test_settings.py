"""Typed settings (docs/configuration.md, "Settings"): each value is checked against its type and range at
start-up; a bad one stops the process with one line naming the variable, the value and what it accepts;
an unknown ``QUEUELOG_*`` name is a warning naming the closest known one; the settings given to
``create_app`` pass the same checks; the settings are one frozen object."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from queuelog import create_app
from queuelog.config import (
    FALSE_WORDS,
    OTHER_VARIABLES,
    PREFIX,
    SPECS,
    TRUE_WORDS,
    Duration,
    Integer,
    Seconds,
    SettingError,
    Settings,
    read_settings,
    unknown_variables,
)
from tests.conftest import ADMIN_PASSWORD, ROOT, LiveServer, free_port

# Misspelt names are put together here, so that tests/test_docs.py does not take them for names the code
# reads.
MISSPELT = PREFIX + "LEASE_SECOND"


def refusal(environ: dict[str, str]) -> str:
    with pytest.raises(SettingError) as caught:
        read_settings(environ)
    return str(caught.value)


# -- each kind of value ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "accepts"),
    [
        ("LEASE_SECONDS", "5m", "an integer from 5 to 43200"),
        ("LEASE_SECONDS", "300.5", "an integer from 5 to 43200"),
        ("SEARCH_SCAN", "lots", "an integer of at least 1"),
        ("LONG_POLL_INTERVAL", "fast", "a number of seconds above 0"),
        ("LONG_POLL_INTERVAL", "nan", "a number of seconds above 0"),
        ("RETRY_BACKOFF_MAX", "inf", "a number of seconds of at least 0"),
        ("SESSION_COOKIE_SECURE", "maybe", "true or false (also 1/0, yes/no, on/off)"),
        ("AUTO_UPGRADE", "2", "true or false (also 1/0, yes/no, on/off)"),
        ("SESSION_IDLE", "2 hours", "a duration (45s, 30m, 12h, 7d, 2w) of at least 1s"),
        ("RETENTION", "7y", "a duration (45s, 30m, 12h, 7d, 2w) of at least 1s"),
        ("RETENTION", "1000000d", "a duration (45s, 30m, 12h, 7d, 2w) of at least 1s"),
        ("SESSION_IDLE", "9999999999w", "a duration (45s, 30m, 12h, 7d, 2w) of at least 1s"),
        ("JOB_TYPES", "-bad,ok", "comma-separated job type names"),
        ("JOB_TYPES", "bad name", "comma-separated job type names"),
        ("JOB_TYPES", " , ", "comma-separated job type names"),
        ("PASSWORD_HASH", "scrypt:1:1:1", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "scrypt:16384", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "scrypt:3000:8:1", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "pbkdf2:sha256:0", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "pbkdf2:sha256:3000000000", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "scrypt:4194304:8:1", SPECS["PASSWORD_HASH"].accepts),
        ("PASSWORD_HASH", "scrypt:131072:1:1", SPECS["PASSWORD_HASH"].accepts),
        ("DATABASE_URL", "queue.sqlite3", SPECS["DATABASE_URL"].accepts),
    ],
)
def test_a_bad_value_of_each_kind_is_one_line_naming_the_variable_the_value_and_what_it_accepts(
    name, value, accepts
):
    assert refusal({PREFIX + name: value}) == f"{PREFIX}{name}={value!r} is not valid: {accepts}"


def test_the_line_never_repeats_a_secret():
    """It lands in logs: passwords, keys and tokens are hidden, and a database URL's password too."""
    line = refusal({PREFIX + "ADMIN_PASSWORD": "short"})
    assert line == f"{PREFIX}ADMIN_PASSWORD=(hidden) is not valid: {SPECS['ADMIN_PASSWORD'].accepts}"
    assert refusal({PREFIX + "METRICS_TOKEN": "  "}).startswith(
        f"{PREFIX}METRICS_TOKEN=(hidden) is not valid"
    )
    assert refusal({PREFIX + "SECRET_KEY": " "}).startswith(f"{PREFIX}SECRET_KEY=(hidden) is not valid")
    line = refusal({PREFIX + "DATABASE_URL": "alice:s3cret/pw@db.example"})
    assert (
        line.startswith(f"{PREFIX}DATABASE_URL='alice:***@db.example' is not valid") and "s3cret" not in line
    )


def test_the_settings_repr_leaves_the_secrets_out(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.sqlite3'}"
    app = make_app(tmp_path, DATABASE_URL=url, METRICS_TOKEN="scrape-token")
    shown = repr(app.config["QUEUELOG"])
    assert "lease_seconds=300" in shown
    assert ADMIN_PASSWORD not in shown and "scrape-token" not in shown and url not in shown, shown
    app.extensions["queuelog"]["db"].dispose()


def bounds(name: str) -> list[tuple[object, object]]:
    """(the value at each edge of the setting's range, one just past it)."""
    kind = SPECS[name].kind
    if isinstance(kind, Integer):
        edges = [(kind.low, kind.low - 1)]
        return edges + ([(kind.high, kind.high + 1)] if kind.high is not None else [])
    if isinstance(kind, Seconds):
        return [(kind.low + 0.001, kind.low)] if kind.above else [(kind.low, kind.low - 0.001)]
    if isinstance(kind, Duration):
        return [(kind.low, kind.low - timedelta(milliseconds=1))]
    return []


RANGED = [name for name in SPECS if bounds(name)]


@pytest.mark.parametrize("name", RANGED)
def test_each_range_takes_its_edge_and_refuses_one_step_past_it(name):
    for inside, outside in bounds(name):
        text = {timedelta: lambda d: f"{d.total_seconds():g}"}.get(type(inside), str)
        assert read_settings({}, {name: inside})[name] == inside
        assert read_settings({PREFIX + name: text(inside)}, {})[name] == inside
        with pytest.raises(SettingError, match=f"^{PREFIX}{name}="):
            read_settings({PREFIX + name: text(outside)})
        with pytest.raises(SettingError, match=f"^{name}="):
            read_settings({}, {name: outside})


def test_the_values_the_call_sites_used_to_patch_over_are_refused():
    """Before, LEASE_SECONDS=0 and SEARCH_SCAN=-5 started, and the search took max(1, ...)."""
    assert "an integer from 5 to 43200" in refusal({PREFIX + "LEASE_SECONDS": "0"})
    assert "an integer of at least 1" in refusal({PREFIX + "SEARCH_SCAN": "-5"})


def test_every_range_is_named_in_what_the_setting_accepts():
    for name in RANGED:
        kind = SPECS[name].kind
        low = kind.low
        words = f"{low.total_seconds():g}s" if isinstance(low, timedelta) else f"{low:g}"
        assert words in kind.accepts, name


@pytest.mark.parametrize(
    ("word", "value"), [*((w, True) for w in TRUE_WORDS), *((w, False) for w in FALSE_WORDS)]
)
def test_the_bool_words_in_any_case(word, value):
    assert (
        read_settings({PREFIX + "SESSION_COOKIE_SECURE": f" {word.upper()} "})["SESSION_COOKIE_SECURE"]
        is value
    )


def test_each_password_hash_it_takes_hashes_a_password():
    """What start-up accepts works when a password is set (werkzeug refuses N not a power of 2, say)."""
    from werkzeug.security import check_password_hash, generate_password_hash

    for method in (
        "scrypt",
        "scrypt:1024:1:1",
        "scrypt:16384:8:1",
        "pbkdf2",
        "pbkdf2:sha256",
        "pbkdf2:sha512:1",
    ):
        taken = read_settings({PREFIX + "PASSWORD_HASH": method})["PASSWORD_HASH"]
        assert check_password_hash(generate_password_hash("a-password", method=taken), "a-password")


def test_durations_in_each_unit_and_in_plain_seconds():
    for text, seconds in [
        ("45s", 45),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("90", 90),
    ]:
        assert read_settings({PREFIX + "RETENTION": text})["RETENTION"] == timedelta(seconds=seconds)


def test_unset_and_empty_variables_give_the_defaults_typed():
    values = read_settings({PREFIX + "LEASE_SECONDS": "", PREFIX + "SESSION_IDLE": ""})
    assert values["LEASE_SECONDS"] == 300 and values["SESSION_IDLE"] == timedelta(hours=2)
    assert values["RETENTION"] is None and values["AUTO_UPGRADE"] is None
    assert isinstance(values["RETRY_BACKOFF_BASE"], float)


# -- the settings given to create_app -------------------------------------------------------------------


def make_app(tmp_path, **settings):
    base = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'q.sqlite3'}",
        "SECRET_KEY": "k",
        "ADMIN_PASSWORD": ADMIN_PASSWORD,
    }
    return create_app({"TESTING": True, "QUEUELOG": {**base, **settings}})


def test_overrides_pass_the_same_checks(tmp_path):
    with pytest.raises(SystemExit) as caught:
        make_app(tmp_path, SEARCH_SCAN=0)
    assert str(caught.value) == "queuelog: SEARCH_SCAN=0 is not valid: an integer of at least 1"
    with pytest.raises(SystemExit, match=r"^queuelog: LEASE_SECONDS=True is not valid"):
        make_app(tmp_path, LEASE_SECONDS=True)  # a bool is not a number of seconds
    with pytest.raises(
        SystemExit, match=r"^queuelog: SEARCH_SCN is not a setting; did you mean SEARCH_SCAN\?$"
    ):
        make_app(tmp_path, SEARCH_SCN=3)


@pytest.mark.parametrize("kind", ["a file", "a folder no file can be written in"])
def test_an_instance_folder_that_cannot_be_used_is_one_line(tmp_path, monkeypatch, kind):
    if kind == "a file":
        folder, reason = tmp_path / "a-file", "File exists"
        folder.write_text("")
    else:  # even root may not write in /proc/self
        folder, reason = Path("/proc/self"), None
    monkeypatch.setenv("QUEUELOG_INSTANCE_PATH", str(folder))
    with pytest.raises(SystemExit) as caught:
        create_app({"TESTING": True, "QUEUELOG": {"ADMIN_PASSWORD": ADMIN_PASSWORD}})
    line = str(caught.value)
    assert line.startswith(f"queuelog: the instance folder {folder} cannot be used: ") and "\n" not in line
    assert line.endswith(
        " (set QUEUELOG_INSTANCE_PATH to a folder, or QUEUELOG_DATABASE_URL and QUEUELOG_SECRET_KEY)"
    )
    if reason:
        assert f"cannot be used: {reason} (" in line


def test_overrides_may_be_typed_or_text_and_are_read_as_attributes_and_by_name(tmp_path):
    app = make_app(
        tmp_path, LEASE_SECONDS="60", SESSION_IDLE=timedelta(minutes=5), SESSION_COOKIE_SECURE=True
    )
    settings = app.config["QUEUELOG"]
    assert isinstance(settings, Settings)
    assert settings.lease_seconds == settings["LEASE_SECONDS"] == 60
    assert settings.session_idle == settings.get("SESSION_IDLE") == timedelta(minutes=5)
    assert settings.session_cookie_secure is True and app.config["SESSION_COOKIE_SECURE"] is True
    assert (
        list(settings.keys()) == list(SPECS) and settings.get("NO_SUCH") is None and "NO_SUCH" not in settings
    )
    with pytest.raises(KeyError):
        settings["lease_seconds"]  # the mapping takes the variables' names
    app.extensions["queuelog"]["db"].dispose()


def test_the_settings_are_frozen_and_a_copy_is_checked(tmp_path):
    app = make_app(tmp_path)
    settings = app.config["QUEUELOG"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.search_scan = 3
    with pytest.raises(TypeError):
        settings["SEARCH_SCAN"] = 3
    assert settings.replace(SEARCH_SCAN="3").search_scan == 3 and settings.search_scan == 10000
    with pytest.raises(SettingError, match="^SEARCH_SCAN=0 is not valid"):
        settings.replace(SEARCH_SCAN=0)
    app.extensions["queuelog"]["db"].dispose()


# -- unknown names ---------------------------------------------------------------------------------------


def test_an_unknown_name_is_a_warning_that_names_the_closest_known_one():
    [message] = unknown_variables({MISSPELT: "60", PREFIX + "LEASE_SECONDS": "60"})
    assert message.startswith(f"{MISSPELT} is not a queuelog setting and is ignored")
    assert f"did you mean {PREFIX}LEASE_SECONDS?" in message
    [message] = unknown_variables({PREFIX + "SEARCH_SCNA": "5"})
    assert f"did you mean {PREFIX}SEARCH_SCAN?" in message


def test_no_warning_for_the_settings_nor_for_the_variables_read_elsewhere():
    environ = {name: "1" for name in OTHER_VARIABLES} | {spec.variable: "1" for spec in SPECS.values()}
    assert unknown_variables({**environ, "OTHER_THING": "1", "QUEUELOGX": "1"}) == []


def test_the_app_logs_the_warning_once_per_process(tmp_path, monkeypatch, caplog):
    name = PREFIX + "BULK_STEP_SECOND"  # a name of this test alone: the process warns once about each
    monkeypatch.setenv(name, "1")
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            make_app(tmp_path).extensions["queuelog"]["db"].dispose()
    warnings = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(warnings) == 1 and f"did you mean {PREFIX}BULK_STEP_SECONDS?" in warnings[0]


# -- start-up of real processes --------------------------------------------------------------------------


def environment(tmp_path, **variables: str) -> dict[str, str]:
    """The environment of a process started by a test: none of the tester's QUEUELOG_* variables, a
    database and an instance folder of its own, and ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    env.update(
        {
            PREFIX + "DATABASE_URL": f"sqlite:///{tmp_path / 'queue.sqlite3'}",
            PREFIX + "INSTANCE_PATH": str(tmp_path / "instance"),
            PREFIX + "SECRET_KEY": "settings-test",
            PREFIX + "ADMIN_PASSWORD": ADMIN_PASSWORD,
        }
    )
    return {**env, **variables}


def start(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int | None, str]:
    """Run ``args`` from the repository root; (exit status, standard error). A process still running after
    ``timeout`` (a server that started) is killed with its children: None."""
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
        return proc.returncode, stderr
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        return None, stderr


FLASK = [sys.executable, "-m", "flask", "--app", "app"]


def gunicorn(*config: str) -> list[str]:
    return [
        sys.executable, "-m", "gunicorn", *config, "--bind", f"127.0.0.1:{free_port()}", "queuelog:create_app()"
    ]  # fmt: skip


LINE = f"queuelog: {PREFIX}LEASE_SECONDS='5m' is not valid: an integer from 5 to 43200"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(lambda: [*FLASK, "run", "--port", str(free_port())], id="flask run"),
        pytest.param(lambda: [*FLASK, "db", "upgrade"], id="flask db upgrade"),
        pytest.param(lambda: [*FLASK, "users", "list"], id="flask users list"),
        pytest.param(lambda: gunicorn("-c", "python:queuelog.gunicorn_conf"), id="gunicorn"),
        pytest.param(lambda: gunicorn(), id="gunicorn with the checkout's gunicorn.conf.py"),
    ],
)
@pytest.mark.slow  # commands and servers in subprocesses
def test_a_bad_value_stops_each_way_of_starting_with_one_line_and_no_traceback(tmp_path, args):
    status, stderr = start(args(), environment(tmp_path, **{PREFIX + "LEASE_SECONDS": "5m"}))
    assert status == 1 and stderr.splitlines() == [LINE], stderr


def test_gunicorn_s_own_counts_are_checked_too(tmp_path):
    status, stderr = start(
        gunicorn("-c", "python:queuelog.gunicorn_conf"), environment(tmp_path, **{PREFIX + "THREADS": "many"})
    )
    assert status == 1 and stderr.splitlines() == [
        f"queuelog: {PREFIX}THREADS='many' is not valid: an integer of at least 1"
    ], stderr


@pytest.mark.slow  # commands and servers in subprocesses
def test_a_flask_command_warns_about_an_unknown_name_and_goes_on(tmp_path):
    status, stderr = start([*FLASK, "db", "upgrade"], environment(tmp_path, **{MISSPELT: "60"}))
    assert status == 0, stderr
    assert stderr.count(f"{MISSPELT} is not a queuelog setting") == 1, stderr
    assert f"did you mean {PREFIX}LEASE_SECONDS?" in stderr


@pytest.mark.slow  # commands and servers in subprocesses
def test_gunicorn_warns_once_for_all_its_workers(tmp_path):
    server = LiveServer(f"sqlite:///{tmp_path / 'queue.sqlite3'}", tmp_path, workers=2, env={MISSPELT: "60"})
    server.start()
    server.stop()
    log = server.log.read_text()
    assert log.count(f"{MISSPELT} is not a queuelog setting") == 1, log
