"""Payload schemas an admin saves cannot make an enqueue slow: a schema whose references multiply the
subschemas one payload value is checked against, a pattern that needs backtracking, or a schema past the
size limit is refused when saved (one queue-layer check, ``check_schema``, for the JSON API, the pages and
the command line), and patterns are matched in time linear in the text. Ordinary schemas with ``$ref``,
``$defs``, ``allOf`` and ``pattern`` are still accepted and enforced.

Every test runs on SQLite and, when its URL is set, on PostgreSQL (the ``backend`` fixture).
"""

from __future__ import annotations

import html
import json
import re
import time

import pytest

from queuelog.queue.types import MAX_SCHEMA_VISITS, SchemaFault, SchemaRefused

EMAIL_BACKTRACKING = r"^([a-zA-Z0-9]+\.?)+@example\.com$"


def doubling(levels: int, leaf: dict | None = None) -> dict:
    """``$defs`` whose every level names the one below twice in ``allOf``: 2**levels visits of the leaf
    for each value the schema is applied to (here each item of ``values``)."""
    defs = {"l0": leaf or {"type": "integer"}}
    for n in range(1, levels + 1):
        defs[f"l{n}"] = {"allOf": [{"$ref": f"#/$defs/l{n - 1}"}, {"$ref": f"#/$defs/l{n - 1}"}]}
    items = {"$ref": f"#/$defs/l{levels}"}
    return {"type": "object", "properties": {"values": {"type": "array", "items": items}}, "$defs": defs}


# Two branches each naming the whole schema again for the child "x": 2**depth visits at payload depth.
DOUBLING_BY_DEPTH = {
    "$defs": {
        "a": {
            "allOf": [
                {"properties": {"x": {"$ref": "#/$defs/a"}}},
                {"properties": {"x": {"$ref": "#/$defs/a"}}},
            ]
        }
    },
    "$ref": "#/$defs/a",
}
HOSTILE = {
    "doubling 16 levels": (doubling(16), SchemaFault.TOO_COSTLY),
    "doubling 29 levels": (doubling(29), SchemaFault.TOO_COSTLY),
    "doubling by payload depth": (DOUBLING_BY_DEPTH, SchemaFault.TOO_COSTLY),
    "a reference to itself": (
        {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
        SchemaFault.TOO_COSTLY,
    ),
    "lookahead": ({"properties": {"e": {"pattern": "^(?=.*@)[a-z@.]+$"}}}, SchemaFault.BAD_PATTERN),
    "backreference": ({"patternProperties": {"^(a+)\\1$": {}}}, SchemaFault.BAD_PATTERN),
    "too large": ({"enum": ["x" * 70_000]}, SchemaFault.TOO_LARGE),
}
ORDINARY = {
    "type": "object",
    "required": ["to", "order"],
    "properties": {
        "to": {"type": "string", "pattern": r"^[a-z]+@example\.com$"},
        "cc": {"type": "array", "items": {"$ref": "#/$defs/address"}},
        "order": {"allOf": [{"$ref": "#/$defs/base"}, {"required": ["lines"]}]},
        "tree": {"$ref": "#/$defs/node"},
    },
    "$defs": {
        "address": {"type": "string", "pattern": EMAIL_BACKTRACKING},
        "base": {"type": "object", "properties": {"lines": {"type": "array", "minItems": 1}}},
        "node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        },
    },
}
GOOD = {
    "to": "ada@example.com",
    "order": {"lines": [1]},
    "cc": ["b.c@example.com"],
    "tree": {"children": [{}]},
}


@pytest.mark.parametrize(("schema", "fault"), HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_schema_is_refused_quickly_when_created_and_when_changed(queue, schema, fault):
    started = time.perf_counter()
    with pytest.raises(SchemaRefused) as refused:
        queue.types.create("report", "ada", "", schema)
    assert time.perf_counter() - started < 2  # the count is memoised: 29 levels cost no more than 16
    assert (refused.value.code, refused.value.field) == (fault, "payload_schema")
    with pytest.raises(SchemaRefused):
        queue.types.change("email", "ada", payload_schema=schema)
    assert "report" not in [t.name for t in queue.types.all()]
    assert queue.types.get("email").payload_schema is None


def test_the_limit_falls_between_two_levels_of_doubling(queue):
    """Six levels check each item against 254 subschemas, seven against 510 (the limit is 256)."""
    assert MAX_SCHEMA_VISITS == 256
    assert queue.types.create("six", "ada", "", doubling(6)).name == "six"
    with pytest.raises(SchemaRefused) as refused:
        queue.types.create("seven", "ada", "", doubling(7))
    assert refused.value.code is SchemaFault.TOO_COSTLY and refused.value.params == {"limit": 256}


def test_an_ordinary_schema_is_accepted_and_enforced(queue, producer):
    queue.types.create("mail", "ada", "", ORDINARY)

    def enqueue(payload: dict):
        return producer.post("/jobs", json={"type": "mail", "payload": payload})

    assert enqueue(GOOD).status_code == 201
    for bad, field in (
        ({**GOOD, "to": "Ada@example.com"}, "payload.to"),
        ({**GOOD, "cc": ["b..c@example.com"]}, "payload.cc[0]"),
        ({**GOOD, "order": {"lines": []}}, "payload.order.lines"),
        ({**GOOD, "order": {}}, "payload.order"),
        ({**GOOD, "tree": {"children": [{"children": 5}]}}, "payload.tree.children[0].children"),
    ):
        answer = enqueue(bad)
        assert answer.status_code == 422 and answer.get_json()["errors"][0]["field"] == field, bad


def test_a_backtracking_pattern_is_matched_in_linear_time(queue, producer):
    """The pattern that once took 17.8 s for 28 characters (and twice that for each one more) costs a
    long text no more than a schema without a pattern does."""
    plain = {"type": "object", "properties": {"e": {"type": "string"}}}
    queue.types.create("plain", "ada", "", plain)
    queue.types.create(
        "email-check", "ada", "", {"type": "object", "properties": {"e": {"pattern": EMAIL_BACKTRACKING}}}
    )

    def best(type_name: str, text: str) -> tuple[float, int]:
        times, status = [], 0
        for _ in range(3):
            started = time.perf_counter()
            status = producer.post("/jobs", json={"type": type_name, "payload": {"e": text}}).status_code
            times.append(time.perf_counter() - started)
        return min(times), status

    short, status = best("email-check", "a" * 28 + "!")
    assert status == 422 and short < 1
    for text in ("a" * 28 + "!", "a1." * 20_000 + "!"):
        hostile, status = best("email-check", text)
        baseline, plain_status = best("plain", text)
        assert (status, plain_status) == (422, 201)
        assert hostile < 3 * baseline + 0.05, (len(text), hostile, baseline)


def test_the_costliest_accepted_schema_stays_within_a_few_plain_passes(queue, producer):
    """At the limit (254 visits per item), 3,000 items cost a few enqueues of a plain schema, where the
    old validator took tens of seconds."""
    queue.types.create("plain", "ada", "", doubling(0))
    queue.types.create("costly", "ada", "", doubling(6))
    payload = {"values": list(range(3000))}

    def best(type_name: str) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            assert producer.post("/jobs", json={"type": type_name, "payload": payload}).status_code == 201
            times.append(time.perf_counter() - started)
        return min(times)

    costly, plain = best("costly"), best("plain")
    assert costly < 10 * plain + 0.05, (costly, plain)


def test_the_api_names_payload_schema_with_the_reason(admin):
    for schema, words in (
        (doubling(16), "more than 256 subschemas"),
        ({"properties": {"e": {"pattern": "(?=a)a"}}}, "cannot be used: patterns are matched in time linear"),
        ({"enum": ["x" * 70_000]}, "more than 65536"),
    ):
        refused = admin.post("/types", json={"name": "report", "payload_schema": schema})
        assert refused.status_code == 422
        [error] = refused.get_json()["errors"]
        assert error["field"] == "payload_schema" and words in error["message"], error
    assert "report" not in [t["name"] for t in admin.get("/types").get_json()["types"]]


def _beside(page, field: str) -> str:
    found = re.search(rf'id="{field}-error">([^<]*)<', page.get_data(as_text=True))
    assert found, f"no message beside {field}"
    return html.unescape(found.group(1))


def test_the_pages_put_the_refusal_beside_the_schema(queue, admin_browser):
    page = admin_browser.submit("/admin/types", name="report", payload_schema=json.dumps(doubling(16)))
    assert page.status_code == 422
    assert _beside(page, "payload_schema").startswith(
        "The schema would check one value of a payload against more than 256 subschemas"
    )
    page = admin_browser.submit("/admin/types/email", payload_schema='{"pattern": "(a)\\\\1"}')
    assert page.status_code == 422
    assert _beside(page, "payload_schema").startswith("The pattern (a)\\1 cannot be used")
    assert "report" not in [t.name for t in queue.types.all()]
    assert queue.types.get("email").payload_schema is None


def test_the_command_line_refuses_it_in_one_line(runner, queue, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(doubling(29)))
    result = runner.invoke(args=["types", "add", "report", "--schema", str(schema)])
    assert result.exit_code == 1
    assert "more than 256 subschemas" in result.output and "report" not in [t.name for t in queue.types.all()]


def test_a_costly_schema_saved_before_the_check_is_unusable_at_once(queue, producer):
    """``add`` writes a schema unchecked, as an older version saved it: an enqueue refuses it on ``type``
    at once instead of taking 2**29 visits."""
    queue.types.add("old", "", doubling(29))
    queue.types.add("old-pattern", "", {"properties": {"e": {"pattern": "(?<=a)b"}}})
    for name in ("old", "old-pattern"):
        started = time.perf_counter()
        refused = producer.post("/jobs", json={"type": name, "payload": {"values": [1], "e": "ab"}})
        assert time.perf_counter() - started < 2
        assert refused.status_code == 422 and refused.get_json()["errors"][0]["field"] == "type"
