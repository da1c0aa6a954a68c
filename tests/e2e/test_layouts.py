"""The pages' layouts in Chromium, on a phone (390 px) and a desktop (1280 px), in all four languages:
nothing wider than the screen, no label squeezed to a letter per line, tables as cards on the phone,
the navigation on one line on the desktop, a readable chart, and a job with six long errors that stays
a page and not a scroll of 50,000 px."""

from __future__ import annotations

from itertools import combinations

import pytest

from tests.conftest import ADMIN_PASSWORD

LOCALES = {"en-US": "en", "pt-BR": "pt_BR", "de-DE": "de", "zh-CN": "zh_Hans"}
PHONE, DESKTOP = (390, 844), (1280, 800)
LONG_ERROR = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/srv/app/venv/lib/python3.12/site-packages/invoicing/render/statement_section_{n}.py", '
        f"line {100 + n}, in render_statement_section_with_a_rather_long_name\n"
        f'    result = renderer.render(template_name="monthly/statement/section_{n}.html", context=ctx)\n'
        for n in range(14)
    )
    + "ConnectionRefusedError: [Errno 111] Connection refused while talking to "
    + "https://pdf-renderer.internal.example.com:8443/api/v2/render?customer=42&sections="
    + "x" * 150
)

# Problems of the page as shown, found by the browser itself: an element with text whose lines are more
# than half its characters (a word broken into pieces: "等/待/中"), a document or table frame wider than
# the screen, stacked cells whose label is not their column's heading.
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const visible = el => el.checkVisibility({visibilityProperty: true, opacityProperty: true})
    && el.getBoundingClientRect().width > 1 && !el.closest('.visually-hidden, details:not([open]) > :not(summary)');
  const clipped = el => { for (let a = el.parentElement; a; a = a.parentElement) {
    if (a.getBoundingClientRect().width <= 1) return true; } return false; };
  const describe = el => `<${el.tagName.toLowerCase()} class="${el.className}"> "${el.innerText.trim().slice(0, 40)}"`;
  const lineCount = el => {
    const tops = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim() || !visible(node.parentElement)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) if (r.width > 0) tops.push(r.top + r.height / 2);
    }
    tops.sort((a, b) => a - b);
    const size = parseFloat(getComputedStyle(el).fontSize);
    let lines = 0, last = -1e9;
    for (const t of tops) { if (t - last > size * 0.6) { lines++; last = t; } }
    return lines;
  };
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) problems.push(`document is ${root.scrollWidth}px wide`);
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) problems.push(`a table scrolls: ${wrap.scrollWidth} > ${wrap.clientWidth}px`);
    const next = wrap.nextElementSibling;
    if (next && visible(next) && next.getBoundingClientRect().top - wrap.getBoundingClientRect().bottom < 8) {
      problems.push(`a table touches the ${next.tagName.toLowerCase()} below it`);
    }
  }
  const selector = 'th, td, .badge, .prio, dt, dd, button, .button, nav a, label, h1, h2, summary, li, p, .tile';
  for (const el of document.querySelectorAll(selector)) {
    if (!visible(el) || clipped(el)) continue;
    const text = el.innerText.replace(/\\s+/g, ' ').trim();
    const chars = [...text].length;
    if (chars < 2) continue;
    const lines = lineCount(el);
    const em = parseFloat(getComputedStyle(el).fontSize);
    if (lines > 1 && (lines > chars / 2 || el.getBoundingClientRect().width < 3 * em)) {
      problems.push(`${describe(el)}: ${chars} characters on ${lines} lines, ${Math.round(el.getBoundingClientRect().width)}px wide`);
    }
  }
  for (const table of document.querySelectorAll('table.stack')) {
    const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
    for (const row of table.querySelectorAll('tbody > tr')) {
      [...row.children].forEach((td, i) => {
        if (td.hasAttribute('data-label') && td.dataset.label !== heads[i]) {
          problems.push(`cell ${i} is labelled "${td.dataset.label}" under "${heads[i]}"`);
        }
      });
    }
  }
  return problems;
}"""

STACKED = """() => [...document.querySelectorAll('table.stack td[data-label]')].filter(td => td.checkVisibility()).map(td => ({
  label: td.dataset.label,
  cls: td.className,
  shown: getComputedStyle(td, '::before').content,
  display: getComputedStyle(td.closest('tr')).display,
  headVisible: td.closest('table').querySelector('thead').getBoundingClientRect().height > 1,
}))"""

NAV_TOPS = """() => [...document.querySelectorAll('.top nav a')].map(a => {
  const r = a.getBoundingClientRect(); return {top: Math.round(r.top), right: r.right, lines: a.getClientRects().length};
})"""

CHART_LABELS = """() => {
  const figure = document.querySelector('figure.chart').getBoundingClientRect();
  return [...document.querySelectorAll('figure.chart span, figure.chart text')]
    .filter(el => el.checkVisibility({visibilityProperty: true}))
    .map(el => { const range = document.createRange(); range.selectNodeContents(el); const r = range.getBoundingClientRect();
      return {text: el.textContent.trim(), font: parseFloat(getComputedStyle(el).fontSize), height: r.height,
              left: r.left, right: r.right, top: r.top, bottom: r.bottom, inside: r.left >= figure.left - 1 && r.right <= figure.right + 1}; });
}"""


def login(page, base: str) -> None:
    page.goto(f"{base}/login")
    page.locator("#username").fill("admin")
    page.locator("#password").fill(ADMIN_PASSWORD)
    page.locator("button.primary").click()
    page.wait_for_url(f"{base}/")


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0}  # a failed attempt is claimable again at once


@pytest.fixture
def busy_queue(backend, app, keys, producer, worker, queue):
    """Jobs in every state, a job that failed six times with long errors, long names, a described type."""
    if backend.name != "sqlite":
        pytest.skip("layouts do not depend on the database engine; checked on SQLite")
    assert 3000 < len(LONG_ERROR) < 4096  # long, and whole: the queue keeps 4096 characters
    queue.types.add("invoice.monthly-statement", "Renders the monthly statement of one customer as a PDF.")
    keys.raw("producer", "bartholomew.longname-operations", role="admin")
    keys.raw("worker", "worker-eu-central-1-build-farm-07")
    for i in range(9):
        producer.post("/jobs", json={"type": ("email", "pdf", "sync")[i % 3], "max_retries": 2})
    for _ in range(4):
        held = worker.post("/jobs/claim").json
        worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    short = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{short['id']}/fail", json={"lease_token": short["lease_token"], "error": "KeyError: 'to'"}
    )
    worker.post("/jobs/claim")  # one running
    job = producer.post(
        "/jobs", json={"type": "invoice.monthly-statement", "max_retries": 5, "payload": {"customer": 42}}
    ).json
    for _ in range(6):
        held = worker.post("/jobs/claim", json={"types": ["invoice.monthly-statement"]}).json
        assert held["id"] == job["id"]
        worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": LONG_ERROR})
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "failed"
    from queuelog.queue.schedules import ScheduleValues

    schedules = app.extensions["queuelog"]["schedules"]
    for name, cron, zone in (("nightly-statements-for-every-customer", "30 2 * * 1-5", "America/Argentina/ComodRivadavia"),
                             ("poll", None, "UTC")):  # fmt: skip
        schedules.add(
            ScheduleValues(
                name,
                "invoice.monthly-statement",
                {"customer": 42},
                cron=cron,
                interval_seconds=None if cron else 300,
                timezone=zone,
            ),
            "admin",
        )
    return job["id"]


def pages(job_id: int) -> dict[str, str]:
    return {
        "dashboard": "/",
        "jobs": "/queue",
        "job": f"/queue/{job_id}",
        "errors": "/admin/errors",
        "users": "/admin/users",
        "keys": "/admin/keys",
        "types": "/admin/types",
        "submit": "/submit",
        "audit": "/admin/audit",
        "search": "/queue?status=failed&path=customer&value=42",
        "bulk": "/queue/bulk/retry?status=failed&type=invoice.monthly-statement",
        "workers": "/admin/workers",
        "figures": "/admin/figures",
        "schedules": "/admin/schedules",
        "schedule": "/admin/schedules/nightly-statements-for-every-customer",
    }


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_pages_fit_a_phone_and_a_desktop(busy_queue, live_server, new_page, console, browser_locale):
    locale = LOCALES[browser_locale]
    server = live_server(workers=1, threads=4)
    for width, height in (PHONE, DESKTOP):
        page = new_page(viewport=(width, height), locale=browser_locale)
        login(page, server.url)
        for name, path in pages(busy_queue).items():
            assert page.goto(server.url + path).status == 200
            where = f"{name} at {width}px in {locale}"
            assert page.evaluate(LAYOUT_PROBLEMS) == [], where
            cells = page.evaluate(STACKED)
            if name in (
                "jobs",
                "job",
                "users",
                "keys",
                "types",
                "audit",
                "search",
                "workers",
                "figures",
                "schedules",
            ):
                assert cells, f"{where}: no table cells"
            for cell in cells:
                if width == PHONE[0]:  # one card per row, each value under its column's name
                    if name == "job" and cell["cls"].split()[0] in ("at", "event"):
                        assert cell["shown"] == "none", where  # a time and an event name: no label
                    else:
                        assert cell["shown"].startswith(f'"{cell["label"]}'), (where, cell)
                    assert cell["display"] in ("block", "grid") and not cell["headVisible"], where
                else:
                    assert (
                        cell["shown"] == "none" and cell["display"] == "table-row" and cell["headVisible"]
                    ), where
            if name == "job":
                tall = page.evaluate("document.documentElement.scrollHeight")
                assert tall < (6000 if width == PHONE[0] else 4000), f"{where}: {tall}px tall"
            if name == "dashboard":
                labels = page.evaluate(CHART_LABELS)
                assert len([label for label in labels if ":" in label["text"]]) >= 3, labels  # times
                for label in labels:
                    assert label["font"] >= 9 and label["height"] >= 9 and label["inside"], (where, label)
                for a, b in combinations(labels, 2):
                    apart = a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"]
                    assert apart or b["bottom"] <= a["top"], f"{where}: chart labels overlap: {a} {b}"
        links = page.evaluate(NAV_TOPS)
        assert len(links) == 12
        assert all(link["lines"] == 1 for link in links), f"a navigation link breaks at {width}px in {locale}"
        if width == DESKTOP[0]:
            assert len({link["top"] for link in links}) == 1, (
                f"navigation on more than one line in {locale}: {links}"
            )
            assert max(link["right"] for link in links) <= width
    assert console.problems == []


def test_long_errors_open_in_full_without_javascript(busy_queue, live_server, chromium):
    """A job's history shows each long error's last line; a click (no script: <details>) shows all of it,
    wrapped to the phone's width."""
    server = live_server(workers=1, threads=4)
    context = chromium.new_context(
        viewport={"width": PHONE[0], "height": PHONE[1]}, java_script_enabled=False
    )
    try:
        page = context.new_page()
        login(page, server.url)
        page.goto(f"{server.url}/queue/{busy_queue}")
        summaries = page.locator("table.history details.error-detail > summary")
        assert summaries.count() == 6
        headline = summaries.first.inner_text()
        assert "ConnectionRefusedError: [Errno 111]" in headline and "Traceback" not in headline
        before = page.evaluate("document.documentElement.scrollHeight")
        summaries.first.click()
        full = page.locator("table.history details.error-detail[open] pre.error-text")
        assert full.count() == 1 and full.inner_text().startswith("Traceback (most recent call last):")
        box = full.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE[0]
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE[0]
        style = full.evaluate("e => [getComputedStyle(e).whiteSpace, getComputedStyle(e).overflowWrap]")
        assert style == ["pre-wrap", "anywhere"]
        assert page.evaluate("document.documentElement.scrollHeight") > before  # it opened in place
    finally:
        context.close()
