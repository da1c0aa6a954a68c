"""The request hooks that Flask extensions add for the pages (CSRF protection, the remember-me cookie) run
for the pages only: the JSON API authenticates with keys and has no session
(docs/api.md#authentication-and-errors). On both engines."""

from __future__ import annotations

from tests.api.test_compact import enqueue


def test_the_page_hooks_of_extensions_run_for_the_pages_only(app, producer, worker, producer_browser):
    # Flask-Login's setting to refresh the remember-me cookie on every request: its hook writes to the
    # session, which an API request does not have.
    app.config["REMEMBER_COOKIE_REFRESH_EACH_REQUEST"] = True
    enqueue(producer, {"n": 1})
    claimed = worker.post("/jobs/claim")
    assert claimed.status_code == 200, claimed.json
    done = worker.post(
        f"/jobs/{claimed.json['id']}/complete", json={"lease_token": claimed.json["lease_token"]}
    )
    assert done.status_code == 200, done.json
    assert "Set-Cookie" not in claimed.headers and "Set-Cookie" not in done.headers

    # The pages keep both hooks: the cookie is refreshed, and a form without its token is refused.
    page = producer_browser.get("/submit")
    assert page.status_code == 200
    assert any(c.startswith("remember_token=") for c in page.headers.getlist("Set-Cookie"))
    refused = producer_browser.client.post("/submit", data={"type": "email", "payload": "{}"})
    assert refused.status_code == 400 and "did not come from this site" in refused.get_data(as_text=True)
