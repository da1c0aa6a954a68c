"""/openapi.json describes every route the JSON API serves, with the methods it answers."""

from __future__ import annotations

import re

from openapi_spec_validator import validate


def test_every_api_route_is_documented(app, client):
    document = client.get("/openapi.json").json
    validate(document)
    documented = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api."):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            served |= {(path, m) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert served == documented
