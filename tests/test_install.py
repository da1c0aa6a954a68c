"""Where queuelog keeps its files and who may read them; what the worker client needs.

The wheel itself (templates, stylesheet and compiled catalogs inside it, a server started from another
folder, the bare install without Flask) is checked by .ci/wheel-check, which builds and installs it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from queuelog import create_app
from queuelog.i18n import load_catalog
from queuelog.paths import STATIC, TEMPLATES
from queuelog.queue.admin import AdminStore
from tests.conftest import ROOT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def fresh_start(tmp_path, monkeypatch):
    """A working directory with nothing configured, under the usual umask 022."""
    for name in ("DATABASE_URL", "SECRET_KEY", "INSTANCE_PATH"):
        monkeypatch.delenv(f"QUEUELOG_{name}", raising=False)
    monkeypatch.setenv("QUEUELOG_ADMIN_PASSWORD", "admin-password-for-tests")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    previous = os.umask(0o022)
    apps = []
    yield work, apps
    for app in apps:
        app.extensions["queuelog"]["db"].dispose()
    os.umask(previous)


def enqueue(app) -> int:
    key = AdminStore(app.extensions["queuelog"]["db"]).create_key(
        f"k-{os.urandom(3).hex()}", "producer", username="admin"
    )
    response = app.test_client().post(
        "/jobs", json={"type": "email"}, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


def test_instance_folder_is_private_and_in_the_working_directory(fresh_start):
    work, apps = fresh_start
    app = create_app({"TESTING": True})
    apps.append(app)
    instance = work / "instance"
    assert app.instance_path == str(instance)
    assert app.config["QUEUELOG"]["DATABASE_URL"] == f"sqlite:///{instance / 'queuelog.sqlite3'}"
    enqueue(app)  # a write: the -wal and -shm files exist while the app's connections are open

    assert mode(instance) == 0o700
    for name in ("secret_key", "queuelog.sqlite3", "queuelog.sqlite3-wal", "queuelog.sqlite3-shm"):
        assert mode(instance / name) == 0o600, name
    assert mode(instance / "queuelog.sqlite3.writer-lock") == 0o600
    assert not list(instance.glob(".secret_key.*")), "a temporary key file was left behind"
    assert len((instance / "secret_key").read_text().strip()) == 64


def test_default_database_url_names_the_same_folder(fresh_start, monkeypatch):
    """The README's default, `sqlite:///instance/queuelog.sqlite3`, is the instance folder's database."""
    work, apps = fresh_start
    first = create_app({"TESTING": True})
    apps.append(first)
    job_id = enqueue(first)
    monkeypatch.setenv("QUEUELOG_DATABASE_URL", "sqlite:///instance/queuelog.sqlite3")
    second = create_app({"TESTING": True})
    apps.append(second)
    assert second.config["SECRET_KEY"] == first.config["SECRET_KEY"]
    assert second.extensions["queuelog"]["queue"].get(job_id)["type"] == "email"


def test_instance_path_from_the_environment(fresh_start, monkeypatch, tmp_path):
    work, apps = fresh_start
    elsewhere = tmp_path / "deploy" / "state"
    monkeypatch.setenv("QUEUELOG_INSTANCE_PATH", str(elsewhere))
    app = create_app({"TESTING": True})
    apps.append(app)
    enqueue(app)
    assert app.instance_path == str(elsewhere)
    assert mode(elsewhere) == 0o700
    assert mode(elsewhere / "queuelog.sqlite3") == 0o600
    assert not (work / "instance").exists()


def test_an_existing_database_file_keeps_its_mode(fresh_start, monkeypatch, tmp_path):
    work, apps = fresh_start
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o750)
    database = shared / "q.sqlite3"
    database.touch(mode=0o640)
    monkeypatch.setenv("QUEUELOG_DATABASE_URL", f"sqlite:///{database}")
    app = create_app({"TESTING": True})
    apps.append(app)
    enqueue(app)
    assert mode(database) == 0o640 and mode(shared) == 0o750


def test_a_checkout_finds_its_top_level_templates_and_static():
    assert TEMPLATES == ROOT / "templates" and (TEMPLATES / "base.html").is_file()
    assert STATIC == ROOT / "static" and (STATIC / "style.css").is_file()


def _compile(po: Path, mo: Path) -> None:
    """What the wheel's build does to a catalog (setup.py)."""
    with po.open("rb") as fh:
        catalog = read_po(fh, locale="de")
    with mo.open("wb") as fh:
        write_mo(fh, catalog)


def test_a_wheels_compiled_catalog_is_read_as_it_is(tmp_path):
    """An installed wheel holds the .mo files without their .po: they are read, and nothing is written."""
    folder = tmp_path / "translations" / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    _compile(
        ROOT / "queuelog" / "translations" / "de" / "LC_MESSAGES" / "messages.po", folder / "messages.mo"
    )
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    catalog = load_catalog(tmp_path / "translations", "de")
    assert catalog.gettext("Log in") == "Anmelden"
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_checkout_reads_its_po_in_memory_and_writes_nothing(tmp_path):
    """A checkout's .po is the catalog, even beside an older compiled .mo (left by an earlier version)."""
    folder = tmp_path / "translations" / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    po = folder / "messages.po"
    shutil.copy(ROOT / "queuelog" / "translations" / "de" / "LC_MESSAGES" / "messages.po", po)
    stale = folder / "messages.mo"
    stale.write_bytes(b"")  # not even a catalog: it must not be read
    po.write_text(po.read_text() + '\nmsgid "A message only this catalog has"\nmsgstr "Nur hier"\n')
    before = sorted(tmp_path.rglob("*"))
    catalog = load_catalog(tmp_path / "translations", "de")
    assert catalog.gettext("A message only this catalog has") == "Nur hier"
    assert catalog.gettext("Log in") == "Anmelden"
    assert sorted(tmp_path.rglob("*")) == before and stale.read_bytes() == b""


def test_a_locale_without_a_catalog_translates_nothing(tmp_path):
    assert load_catalog(tmp_path, "en").gettext("Log in") == "Log in"


def test_starting_from_a_checkout_writes_no_catalog(fresh_start):
    """Start-up compiles nothing: the checkout's translations folder holds its .po files alone, and a page
    is served in German all the same."""
    work, apps = fresh_start
    translations = ROOT / "queuelog" / "translations"
    for leftover in translations.glob("*/LC_MESSAGES/messages.mo"):
        leftover.unlink()  # left by a version that compiled at start-up
    app = create_app({"TESTING": True})
    apps.append(app)
    page = app.test_client().get("/login", headers={"Accept-Language": "de"})
    assert page.status_code == 200 and "Anmelden" in page.get_data(as_text=True)
    assert list(translations.glob("*/LC_MESSAGES/*.mo")) == []


def test_the_worker_and_producer_clients_import_no_server_package():
    """Worker and producer machines install queuelog without the server extra: the clients must not need
    it."""
    code = (
        "import sys, queuelog.worker, queuelog.worker.cli, queuelog.worker.demo, queuelog.client\n"
        "loaded = sorted(m for m in ('flask', 'sqlalchemy', 'psycopg', 'alembic', 'werkzeug') if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_an_existing_open_instance_folder_is_reported_not_changed(fresh_start, caplog):
    """A folder made by an older version (0755) is left as it is, with a warning that says what to do."""
    work, apps = fresh_start
    (work / "instance").mkdir(mode=0o755)
    with caplog.at_level("WARNING", logger="queuelog.paths"):
        app = create_app({"TESTING": True})
    apps.append(app)
    assert mode(work / "instance") == 0o755
    assert any("chmod 700" in record.getMessage() for record in caplog.records)
    assert mode(work / "instance" / "secret_key") == 0o600
