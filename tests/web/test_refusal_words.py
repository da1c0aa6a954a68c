"""Each refusal code reaches the pages as a translated message beside its field (queuelog/web/refusals.py),
never as the API's English words; the API says the same codes in its own table (queuelog/api/refusals.py)."""

from __future__ import annotations

import ast
import html
import json
import re

import pytest

from queuelog.access.refusals import Refusal
from queuelog.api.refusals import TABLE
from queuelog.queue import Code
from queuelog.queue.errors import SCHEDULE_CODES
from queuelog.queue.types import SchemaFault
from tests.conftest import ROOT

DEEP = json.dumps(json.loads("[" * 40 + "]" * 40))
SUBMIT = {"type": "email", "payload": "{}", "priority": "low", "max_retries": "3"}


def _german(browser):
    browser.submit("/", "/language", locale="de", next="/")
    return browser


def _beside(page, field: str) -> str:
    found = re.search(rf'id="{field}-error">([^<]*)<', page.get_data(as_text=True))
    assert found, f"no message beside {field}"
    return html.unescape(found.group(1))


@pytest.mark.parametrize(
    ("form", "field", "words"),
    [
        (
            {"payload": json.dumps({"a": "x" * 70000})},
            "payload",
            "Die Nutzdaten sind serialisiert 70.008 Bytes groß; die Grenze liegt bei 65.536 Bytes.",
        ),
        (
            {"payload": '{"a": "\\u0000"}'},
            "payload",
            "Die Nutzdaten enthalten das NUL-Zeichen (\\u0000), das nicht gespeichert werden kann.",
        ),
        (
            {"payload": '{"a": "\\udc00"}'},
            "payload",
            "Die Nutzdaten enthalten Text, der kein gültiges Unicode ist (ein einzelnes Surrogat).",
        ),
        (
            {"payload": '{"a": NaN}'},
            "payload",
            "Zahlen in den Nutzdaten müssen endlich sein (kein NaN und kein Infinity).",
        ),
        (
            {"payload": '{"a": ' + DEEP + "}"},
            "payload",
            "Die Nutzdaten sind mehr als 32 Ebenen tief verschachtelt.",
        ),
        ({"payload": "[1, 2]"}, "payload", "Die Nutzdaten müssen ein JSON-Objekt sein."),
        (
            {"type": "rm-rf"},
            "type",
            "Der Job-Typ rm-rf ist unbekannt oder gesperrt. Freigegebene Typen: email, pdf, sync.",
        ),
        (
            {"priority": "critical"},
            "priority",
            "Produzenten dürfen nur die Prioritäten niedrig und mittel verwenden.",
        ),
        (
            {"idempotency_key": "night\u2028ly"},
            "idempotency_key",
            "Verwende nur druckbare Zeichen, keine Zeilenumbrüche oder anderen Steuerzeichen.",
        ),
        (
            {"run_at": "9001-01-01T00:00"},
            "run_at",
            "Wähle eine Startzeit zwischen den Jahren 2000 und 9000.",
        ),
    ],
)
def test_each_refusal_of_a_job_is_german_beside_its_field(producer_browser, queue, form, field, words):
    page = _german(producer_browser).submit("/submit", **{**SUBMIT, **form})
    assert page.status_code == 422
    assert _beside(page, field) == words
    assert queue.list_jobs(owner="alice", limit=5) == []


def test_a_schema_failure_names_its_path_in_german(producer_browser, queue):
    queue.types.add(
        "invoice",
        schema={"type": "object", "properties": {"lines": {"type": "array", "items": {"type": "integer"}}}},
    )
    page = _german(producer_browser).submit(
        "/submit", **{**SUBMIT, "type": "invoice", "payload": '{"lines": [1, "two"]}'}
    )
    assert page.status_code == 422
    assert (
        _beside(page, "payload")
        == 'payload.lines[1] passt nicht zum Schema des Job-Typs: "two" is not of type "integer"'
    )
    assert queue.list_jobs(owner="alice", limit=5) == []


def test_a_reused_idempotency_key_is_german_beside_the_key(producer_browser, producer, queue):
    producer.post("/jobs", json={"type": "email", "payload": {"a": 1}, "idempotency_key": "nightly"})
    page = _german(producer_browser).submit("/submit", **SUBMIT, idempotency_key="nightly")
    assert page.status_code == 422
    assert (
        _beside(page, "idempotency_key")
        == "Dieser Idempotenzschlüssel wurde schon mit anderen Angaben verwendet."
    )
    assert len(queue.list_jobs(owner="alice", limit=5)) == 1


def test_an_admin_may_use_any_priority_from_the_page(admin_browser, queue):
    page = admin_browser.submit("/submit", **{**SUBMIT, "priority": "critical"})
    assert page.status_code == 302
    assert queue.list_jobs(owner="admin", limit=5)[0]["priority"] == 30


def test_cancel_and_retry_refusals_are_flashed_in_german(admin_browser, producer, worker):
    done = producer.post("/jobs", json={"type": "email"}).json
    claimed = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{claimed['id']}/complete", json={"lease_token": claimed["lease_token"]})
    pending = producer.post("/jobs", json={"type": "email"}).json
    b = _german(admin_browser)
    b.submit(f"/queue/{done['id']}", f"/queue/{done['id']}/cancel")
    assert "Nur wartende oder laufende Jobs lassen sich abbrechen." in b.get(f"/queue/{done['id']}").get_data(
        as_text=True
    )
    b.submit(f"/queue/{pending['id']}", f"/queue/{pending['id']}/retry")
    page = b.get(f"/queue/{pending['id']}").get_data(as_text=True)
    assert "Nur fehlgeschlagene oder abgebrochene Jobs lassen sich erneut versuchen." in page


def test_every_code_has_words_on_every_face():
    from queuelog.web.refusals import MESSAGES

    assert set(TABLE) == set(Code)
    assert set(MESSAGES[Code]) == set(Code)
    assert set(MESSAGES[Refusal]) == set(Refusal)
    assert set(MESSAGES[SchemaFault]) == set(SchemaFault)


def test_the_command_line_words_every_schedule_code_itself():
    from queuelog.cli.schedules import WORDS

    assert set(WORDS) == SCHEDULE_CODES


def test_no_page_module_imports_the_json_api():
    """The pages word refusals themselves: nothing under queuelog/web reaches into queuelog.api."""
    offenders = []
    for path in sorted((ROOT / "queuelog" / "web").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {n}" for n in names if n == "queuelog.api" or n.startswith("queuelog.api.")
            ]
    assert offenders == []


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ('{"$ref": "https://example.com/s.json"}', "Das Schema verweist auf ein anderes Dokument"),
        (
            '{"type": 5}',
            "Kein gültiges JSON Schema: 5 is not valid under any of the schemas listed in the 'anyOf'",
        ),
        ('{"allOf": ' + "[" * 40 + "]" * 40 + "}", "Das Schema ist tiefer als 32 Ebenen verschachtelt."),
    ],
)
def test_a_refused_schema_is_german_beside_its_field(admin_browser, schema, words):
    page = _german(admin_browser).submit("/admin/types", name="report", payload_schema=schema)
    assert page.status_code == 422
    assert _beside(page, "payload_schema").startswith(words)


def test_the_command_line_words_a_refused_schema_itself(app, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"$ref": "https://example.com/s.json"}')
    result = app.test_cli_runner().invoke(args=["types", "add", "report", "--schema", str(schema)])
    assert result.exit_code == 1
    assert "only references within the schema (#...) are allowed" in result.output
