"""The OpenAPI 3.1 description served at ``/openapi.json``, written at start-up from the declared operations
(``registry.py``: each operation with its request and answer shapes) with the configured limits filled in.
A test checks that it documents every route and nothing else, and another that the API does what it says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuelog.api import registry
from queuelog.api.shapes import COMPONENTS, Configured, fill

INPUT_RULES = (
    "Authenticate with `Authorization: Bearer <api key>`. Request bodies are `application/json`, not "
    "compressed; an empty body counts as `{{}}`; malformed JSON is 400; unknown fields are 422, all of them "
    "named. Integers are written without a fraction or exponent (3, not 3.0). Errors are RFC 9457 problem "
    "details; a 422 lists each invalid input as `errors: [{{field, message}}]`, with paths such as "
    "`jobs[3].type` or `payload.lines[1]`. A request may be at most {MAX_REQUEST_BYTES:,} bytes."
)


def document(limits: Mapping[str, Any]) -> dict[str, Any]:
    """The whole document, with ``limits`` (the app's ``QUEUELOG`` configuration) filled in."""
    return fill(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "queuelog",
                "version": "1",
                "description": Configured(text="Background job queue JSON API. " + INPUT_RULES),
            },
            "security": [{"bearer": []}],
            "components": {
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                "schemas": COMPONENTS,
            },
            "paths": registry.paths(),
        },
        limits,
    )
