"""Flow control's pages in Chromium (docs/flow-control.md), on a phone (390 px) and a desktop (1280 px) in
all four languages: a job type's edit page with every limit refused beside its field, the types list with
running / limit and the rates, and the dashboard's panel; nothing wider than the screen, no squeezed label.
The form is a plain form: it is submitted as a person would, and the 422 page is the one checked."""

from __future__ import annotations

import pytest

from tests.e2e.test_layouts import DESKTOP, LAYOUT_PROBLEMS, LOCALES, PHONE, login

LONG = "invoice.monthly-statement-renderer-eu"

FIELD_BOXES = """() => [...document.querySelectorAll('fieldset.flow-control .field')].map(f => {
  const box = f.getBoundingClientRect(), input = f.querySelector('input').getBoundingClientRect();
  const error = f.querySelector('p.error');
  const e = error ? error.getBoundingClientRect() : null;
  return {name: f.querySelector('input').name, error: error ? error.innerText : null,
          inside: input.left >= box.left - 1 && input.right <= box.right + 1 && box.right <= window.innerWidth,
          below: e ? e.top >= input.bottom - 1 && e.right <= window.innerWidth : true};
})"""


@pytest.fixture
def limited_types(backend, queue, producer, worker):
    if backend.name != "sqlite":
        pytest.skip("layouts do not depend on the database engine; checked on SQLite")
    queue.types.add(LONG, "Renders the monthly statement of one customer as a PDF, for the EU customers.")
    queue.types.set_limits(LONG, "admin", concurrency_limit=10_000, rate_limit=1_000_000, rate_period=86_400)
    queue.types.set_limits("email", "admin", concurrency_limit=2, rate_limit=10, rate_period=30)
    producer.post("/jobs", json={"type": "email"})
    worker.post("/jobs/claim", json={"types": ["email"]})


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_flow_control_pages_fit_a_phone_and_a_desktop(
    limited_types, live_server, new_page, console, browser_locale
):
    server = live_server(workers=1, threads=4)
    for width, height in (PHONE, DESKTOP):
        page = new_page(viewport=(width, height), locale=browser_locale)
        login(page, server.url)
        where = f"at {width}px in {LOCALES[browser_locale]}"

        assert page.goto(f"{server.url}/admin/types/{LONG}").status == 200
        assert page.evaluate(LAYOUT_PROBLEMS) == [], f"the edit page {where}"
        page.locator("#concurrency_limit").fill("0")
        page.locator("#rate_limit").fill("1.5")
        page.locator("#rate_period").fill("99999")
        with page.expect_navigation() as refused:
            page.locator("form button.primary").click()
        assert refused.value.status == 422, where
        boxes = page.evaluate(FIELD_BOXES)
        assert [b["name"] for b in boxes if b["error"]] == ["concurrency_limit", "rate_limit", "rate_period"]
        assert all(b["inside"] and b["below"] for b in boxes), (where, boxes)
        assert page.evaluate(LAYOUT_PROBLEMS) == [], f"the refused edit page {where}"

        assert page.goto(f"{server.url}/admin/types").status == 200
        assert page.evaluate(LAYOUT_PROBLEMS) == [], f"the types {where}"
        running = page.locator("table.stack td.running").all_inner_texts()
        assert "1 / 2" in running and any(
            text.endswith("10.000") or text.endswith("10,000") for text in running
        )

        assert page.goto(f"{server.url}/").status == 200
        assert page.locator("section.flow-control tbody tr").count() == 2, where
        assert page.evaluate(LAYOUT_PROBLEMS) == [], f"the dashboard {where}"
    assert console.problems == []
