"""The batches' pages in Chromium (docs/batches.md): the batches list and a batch's page, with its progress
bar, counts, jobs and dependency graph, fit a phone (390 px) and a desktop (1280 px) in all four
languages; the graph is drawn on the server, so it is there with JavaScript off, and its jobs are links."""

from __future__ import annotations

import pytest

from tests.e2e.test_layouts import DESKTOP, LAYOUT_PROBLEMS, LOCALES, PHONE, login

GRAPH = """() => {
  const svg = document.querySelector('svg.graph');
  const card = svg.closest('.card').getBoundingClientRect();
  const r = svg.getBoundingClientRect();
  const box = svg.querySelector('a.node rect').getBoundingClientRect();
  const label = svg.querySelector('a.node text');
  return {
    nodes: svg.querySelectorAll('a.node').length,
    arrows: svg.querySelectorAll('.edges line').length,
    inside: r.left >= card.left - 0.5 && r.right <= card.right + 0.5,
    scale: r.width / svg.viewBox.baseVal.width,
    boxWidth: box.width,
    fontSize: parseFloat(getComputedStyle(label).fontSize) * (r.width / svg.viewBox.baseVal.width),
  };
}"""
PROGRESS = """() => {
  const bar = document.querySelector('.batch-summary progress');
  const r = bar.getBoundingClientRect();
  const card = bar.closest('.card').getBoundingClientRect();
  return {value: bar.value, max: bar.max, width: r.width, inside: r.left >= card.left && r.right <= card.right};
}"""


@pytest.fixture
def batch(backend, producer, worker, admin):
    """A batch of a fan-out and a join with a long description: one job completed, one failed, others
    pending and waiting; and one more batch, succeeded, for the list."""
    if backend.name != "sqlite":
        pytest.skip("layouts do not depend on the database engine; checked on SQLite")
    jobs = [{"type": "email", "ref": "root"}]
    jobs += [{"type": "pdf", "ref": f"page{i}", "depends_on": ["root"]} for i in range(7)]
    jobs += [{"type": "sync", "depends_on": [f"page{i}" for i in range(7)], "on_dependency_failure": "run"}]
    body = {
        "jobs": jobs,
        "description": "monthly statements for the northern region, with the rather long name of a batch",
        "on_success": {"type": "email"},
        "on_finish": {"type": "email"},
    }
    made = admin.post("/batches", json=body).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{held['id']}/fail",
        json={"lease_token": held["lease_token"], "error": "x", "retryable": False},
    )
    return made["id"]


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_the_batch_page_and_the_batches_list_fit_a_phone_and_a_desktop(
    batch, live_server, new_page, console, browser_locale
):
    server = live_server(workers=1, threads=4)
    for width, height in (PHONE, DESKTOP):
        page = new_page(viewport=(width, height), locale=browser_locale)
        login(page, server.url)
        where = f"the batch at {width}px in {LOCALES[browser_locale]}"
        assert page.goto(f"{server.url}/queue/batches/{batch}").status == 200
        graph = page.evaluate(GRAPH)
        assert graph["nodes"] == 9 and graph["arrows"] == 14 and graph["inside"], (where, graph)
        assert graph["scale"] >= 0.99 and graph["fontSize"] >= 10, (where, graph)  # at its own size: readable
        bar = page.evaluate(PROGRESS)
        assert (bar["value"], bar["max"]) == (2, 9) and bar["width"] >= 100 and bar["inside"], (where, bar)
        assert page.evaluate(LAYOUT_PROBLEMS) == [], where
        assert page.goto(f"{server.url}/queue/batches").status == 200
        assert page.locator(f"a[href='/queue/batches/{batch}']").count() == 1
        assert page.evaluate(LAYOUT_PROBLEMS) == [], (
            f"the batches list at {width}px in {LOCALES[browser_locale]}"
        )
    assert console.problems == []


def test_the_graph_needs_no_javascript_and_its_jobs_are_links(batch, live_server, chromium):
    server = live_server(workers=1, threads=4)
    context = chromium.new_context(
        viewport={"width": PHONE[0], "height": PHONE[1]}, java_script_enabled=False
    )
    try:
        page = context.new_page()
        login(page, server.url)
        assert page.goto(f"{server.url}/queue/batches/{batch}").status == 200
        assert page.locator("svg.graph a.node").count() == 9
        page.locator("svg.graph a.node").first.click()
        page.wait_for_load_state()
        assert "/queue/" in page.url
        assert page.locator("dd.job-batch a").get_attribute("href") == f"/queue/batches/{batch}"
    finally:
        context.close()
