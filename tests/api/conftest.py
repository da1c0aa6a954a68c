"""The JSON API's tests' shared fixtures."""

from __future__ import annotations

import jsonschema_rs
import pytest


@pytest.fixture
def served(app):
    """A validator for each answer schema the served document names, by path, method and status."""
    doc = app.test_client().get("/openapi.json").get_json()

    def check(path: str, method: str, status: int, value) -> None:
        answer = doc["paths"][path][method]["responses"][str(status)]
        schema = next(iter(answer["content"].values()))["schema"]
        validator = jsonschema_rs.Draft202012Validator({**schema, "components": doc["components"]})
        assert validator.is_valid(value), (path, method, value)

    return check
