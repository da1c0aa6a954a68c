"""The JSON API reference page, written at build time from the app's own ``/openapi.json``.

``docs/api-reference.md`` holds the page's title and a marker; on ``source-read`` this extension creates
the app on a throwaway SQLite database, asks it for ``/openapi.json`` and puts the paths (parameters,
request bodies, answers) and the schemas in the marker's place, as MyST markdown. Nothing of the reference
is written by hand, so it cannot drift from what the server validates and answers.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

MARKER = "<!-- openapi-reference -->"
DOCNAME = "api-reference"
METHODS = ("get", "post", "put", "patch", "delete")
GROUPS = (  # the order of the page's sections: the first path prefix that matches
    ("Jobs: producers and admins", ("/jobs", "/jobs/batch", "/jobs/{job_id}", "/jobs/{job_id}/events")),
    (
        "Jobs: workers",
        (
            "/jobs/claim",
            "/jobs/complete",
            "/jobs/{job_id}/heartbeat",
            "/jobs/{job_id}/complete",
            "/jobs/{job_id}/fail",
            "/jobs/{job_id}/snooze",
            "/jobs/{job_id}/cancelled",
        ),
    ),
    ("Jobs: cancel and retry", ("/jobs/{job_id}/cancel", "/jobs/{job_id}/retry")),
    ("Schedules", ("/schedules", "/schedules/{name}", "/schedules/{name}/run")),
    ("Job types", ("/types", "/types/{name}")),
    ("Operations", ("/healthz", "/metrics", "/openapi.json")),
)


def openapi_document() -> dict[str, Any]:
    """Create the app on a new SQLite file and return what it serves at ``/openapi.json``."""
    from queuelog import create_app

    alembic = logging.getLogger("alembic")
    level = alembic.level
    alembic.setLevel(logging.WARNING)  # the throwaway database's migrations are no news in the build's log
    with tempfile.TemporaryDirectory() as folder:
        settings = {
            "DATABASE_URL": f"sqlite:///{Path(folder) / 'docs.sqlite3'}",
            "SECRET_KEY": "docs-build",
            "ADMIN_PASSWORD": "docs-build-only",
        }
        app = create_app({"TESTING": True, "QUEUELOG": settings})
        try:
            answer = app.test_client().get("/openapi.json")
            assert answer.status_code == 200, answer.status_code
            return json.loads(answer.get_data(as_text=True))
        finally:
            app.extensions["queuelog"]["db"].dispose()
            alembic.setLevel(level)


def cell(text: Any) -> str:
    """Text fit for one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def anchor(name: str) -> str:
    return name.lower()


def describe_type(schema: dict[str, Any]) -> str:
    """A schema in a few words: its type or the schema it refers to, and its bounds."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        words = "printable text" if name == "PrintableText" else f"[{name}](#{anchor(name)})"
    elif "anyOf" in schema or "oneOf" in schema:
        words = " or ".join(describe_type(s) for s in schema.get("anyOf", schema.get("oneOf")))
    elif "allOf" in schema:
        words = " and ".join(describe_type(s) for s in schema["allOf"])
    elif "enum" in schema:
        words = "one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    else:
        kind = schema.get("type", "any")
        kinds = kind if isinstance(kind, list) else [kind]
        words = " or ".join(kinds)
        if "array" in kinds and "items" in schema:
            words = f"array of {describe_type(schema['items'])}"
        if "format" in schema:
            words += f" ({schema['format']})"
    bounds = []
    for key, word in (
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
        ("minimum", "≥"),
        ("maximum", "≤"),
    ):
        if key in schema:
            bounds.append(
                f"{word} {schema[key]:,}" if isinstance(schema[key], int) else f"{word} {schema[key]}"
            )
    for key, word in (("minItems", "items ≥"), ("maxItems", "items ≤")):
        if key in schema:
            bounds.append(f"{word} {schema[key]:,}")
    if "default" in schema:
        bounds.append(f"default `{json.dumps(schema['default'])}`")
    return words + (f" ({', '.join(bounds)})" if bounds else "")


def fields_table(schema: dict[str, Any]) -> list[str]:
    """The properties of an object schema as a table: field, type, required, description."""
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", ()))
    lines = ["| field | type | required | description |", "| --- | --- | --- | --- |"]
    for name, prop in properties.items():
        yes = "yes" if name in required else ""
        lines.append(
            f"| `{name}` | {cell(describe_type(prop))} | {yes} | {cell(prop.get('description', ''))} |"
        )
    return lines


def body_line(content: dict[str, Any]) -> str:
    return "; ".join(f"`{kind}`: {describe_type(media.get('schema', {}))}" for kind, media in content.items())


def operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### {method.upper()} {path}", "", op.get("summary", "") + ".", ""]
    if op.get("description"):
        lines += [op["description"], ""]
    if op.get("security") == []:
        lines += ["No API key needed.", ""]
    parameters = op.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | description |", "| --- | --- | --- | --- |"]
        for p in parameters:
            schema = p.get("schema", {})
            required = " (required)" if p.get("required") else ""
            description = p.get("description") or schema.get("description", "")
            lines.append(
                f"| `{p['name']}`{required} | {p['in']} | {cell(describe_type(schema))} | {cell(description)} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        required = "" if body.get("required") else " (optional)"
        lines += [f"Request body{required}: {body_line(body.get('content', {}))}.", ""]
    lines += ["| answer | meaning | body | headers |", "| --- | --- | --- | --- |"]
    for status, answer in sorted(op.get("responses", {}).items()):
        headers = ", ".join(f"`{name}`" for name in answer.get("headers", {}))
        content = body_line(answer.get("content", {}))
        lines.append(f"| {status} | {cell(answer.get('description', ''))} | {cell(content)} | {headers} |")
    return lines + [""]


def render(document: dict[str, Any]) -> str:
    """The reference as MyST markdown: the API's description, each operation by group, then the schemas."""
    lines = [document["info"].get("description", ""), ""]
    lines += [
        f"OpenAPI {document['openapi']}; every operation takes `Authorization: Bearer <api key>` unless it"
        " says otherwise. The schemas are at the end of the page.",
        "",
    ]
    paths = document["paths"]
    placed: set[str] = set()
    for title, members in GROUPS:
        lines += [f"## {title}", ""]
        for path in members:
            for method in METHODS:
                if method in paths.get(path, {}):
                    lines += operation(method, path, paths[path][method])
            placed.add(path)
    rest = [path for path in paths if path not in placed]
    if rest:  # a path added to the API after this page's groups: listed, never left out
        lines += ["## Other paths", ""]
        for path in rest:
            for method in METHODS:
                if method in paths[path]:
                    lines += operation(method, path, paths[path][method])
    lines += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [schema["description"], ""]
        if name == "PrintableText":
            lines += ["A string of printable characters, as Python's `str.isprintable` defines them.", ""]
            continue
        table = fields_table(schema)
        if table:
            lines += table + [""]
            if schema.get("additionalProperties") is False:
                lines += ["Other fields are refused (422, naming them).", ""]
        else:
            lines += [f"Type: {describe_type(schema)}.", ""]
    return "\n".join(lines)


def on_source_read(app, docname: str, source: list[str]) -> None:
    if docname == DOCNAME:
        assert MARKER in source[0], f"docs/{DOCNAME}.md lost its marker {MARKER}"
        source[0] = source[0].replace(MARKER, render(openapi_document()))


def setup(app):
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
