"""The schedules and figures pages in Chromium, on a phone (390 px) and a desktop (1280 px), in all four
languages: nothing wider than the screen, no two pieces of text on top of each other (a stacked cell's
label over its value), the schedule form's checkbox beside its label, its time zone taken from the browser,
its delete behind a confirmation, and a header that leaves a phone's screen to the page."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queuelog.models import utcnow
from queuelog.queue.schedules import ScheduleValues
from tests.e2e.conftest import screenshot
from tests.e2e.test_layouts import DESKTOP, LAYOUT_PROBLEMS, LOCALES, PHONE, login

# Text drawn over other text, or a stacked cell's value that wraps under its label. A stacked cell's label is its ::before, which no range can measure: a real
# element with the same words and style takes its place while the page is measured.
OVERLAPS = """() => {
  const probes = [];
  for (const td of document.querySelectorAll('td[data-label]')) {
    const before = getComputedStyle(td, '::before');
    if (before.content === 'none' || before.display === 'none') continue;
    const span = document.createElement('span');
    span.textContent = td.dataset.label;
    for (const p of ['font-size', 'font-weight', 'white-space', 'word-break', 'overflow-wrap', 'line-height'])
      span.style.setProperty(p, before.getPropertyValue(p));
    span.className = 'probe-label';
    td.prepend(span);
    probes.push(span);
  }
  const style = new CSSStyleSheet();  // not a <style> element: the pages' CSP refuses those
  style.replaceSync('td[data-label]::before { content: none !important; }');
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, style];
  const clipped = el => { for (let a = el; a; a = a.parentElement) {
    const r = a.getBoundingClientRect(); if (r.width <= 1 || r.height <= 1) return true; } return false; };
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || ['OPTION', 'SCRIPT', 'STYLE'].includes(el.tagName)) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true}) || clipped(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width > 0.5 && r.height > 0.5) boxes.push({el, text: node.textContent.trim().slice(0, 30), r});
    }
  }
  const problems = [];
  for (const probe of probes) {  // a stacked cell's value stays in the column beside its label
    const td = probe.parentElement, edge = probe.getBoundingClientRect().right;
    if (getComputedStyle(td).display !== 'grid') continue;
    for (const b of boxes) if (td.contains(b.el) && b.el !== probe && b.r.left < edge - 1)
      problems.push(`"${b.text}" sits under its label "${td.dataset.label}"`);
  }
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.el === b.el) continue;
    const x = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
    const y = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
    if (x > 1 && y > 2) problems.push(`"${a.text}" overlaps "${b.text}"`);
  }
  probes.forEach(p => p.remove());
  document.adoptedStyleSheets = document.adoptedStyleSheets.filter(s => s !== style);
  return problems;
}"""

CHECKBOX = """() => {
  const box = document.querySelector('#paused').getBoundingClientRect();
  const label = document.querySelector('label[for=paused]').getBoundingClientRect();
  return {beside: box.right <= label.left && box.bottom > label.top && box.top < label.bottom,
          box: [box.left, box.top], label: [label.left, label.top]};
}"""


@pytest.fixture
def console_data(backend, app, queue, producer, worker):
    """Two schedules (one in Europe/Berlin, one with a long name) and per-type figures in milliseconds and
    minutes: jobs that waited and ran from 57 ms to four minutes."""
    if backend.name != "sqlite":
        pytest.skip("layouts do not depend on the database engine; checked on SQLite")
    schedules = app.extensions["queuelog"]["schedules"]
    schedules.add(ScheduleValues("nightly-statements-for-every-customer", "pdf", {"customer": 42},
                                 cron="30 2 * * 1-5", timezone="Europe/Berlin"), "admin")  # fmt: skip
    schedules.add(ScheduleValues("poll", "email", {}, interval_seconds=300), "admin")
    start = utcnow() - timedelta(minutes=30)
    now = [start]
    queue.clock = lambda: now[0]
    for i, (wait, run) in enumerate(((0.057, 0.24), (150, 240), (3, 0.9))):
        now[0] = start + timedelta(minutes=6 * i)
        producer.post("/jobs", json={"type": "pdf", "max_retries": 0})
        now[0] += timedelta(seconds=wait)
        held = worker.post("/jobs/claim").json
        now[0] += timedelta(seconds=run)
        worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})


def pages() -> dict[str, str]:
    return {"figures": "/admin/figures", "schedules": "/admin/schedules", "schedule-form": "/admin/schedules/new",
            "schedule": "/admin/schedules/nightly-statements-for-every-customer"}  # fmt: skip


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_schedules_and_figures_fit_a_phone_and_a_desktop(
    console_data, live_server, new_page, console, browser_locale
):
    locale = LOCALES[browser_locale]
    server = live_server(workers=1, threads=4)
    for width, height in (PHONE, DESKTOP):
        page = new_page(viewport=(width, height), locale=browser_locale)
        login(page, server.url)
        for name, path in pages().items():
            assert page.goto(server.url + path).status == 200
            where = f"{name} at {width}px in {locale}"
            assert page.evaluate(LAYOUT_PROBLEMS) == [], where
            assert page.evaluate(OVERLAPS) == [], where
            screenshot(page, f"{name}-{locale}-{width}")
            header = page.locator("header.top").bounding_box()["height"]
            assert header <= (120 if width == PHONE[0] else 110), f"{where}: the header is {header}px tall"
            if name == "schedule-form":
                assert page.evaluate(CHECKBOX)["beside"], (where, page.evaluate(CHECKBOX))
                page.locator("#name").fill("two words")
                page.locator("#cron").fill("61 * * * *")
                page.locator("#payload").fill('{"to": ')
                with page.expect_navigation() as refused:
                    page.locator("button.primary").click()
                assert refused.value.status == 422, where
                assert page.locator("p.error").count() == 3, where
                assert page.evaluate(LAYOUT_PROBLEMS) == [], f"refused {where}"
                assert page.evaluate(OVERLAPS) == [], f"refused {where}"
                screenshot(page, f"schedule-form-refused-{locale}-{width}")
    assert console.problems == []


@pytest.mark.parametrize("script", [True, False])
def test_a_new_schedule_takes_the_browsers_time_zone(backend, live_server, chromium, script):
    """With script, the new schedule's zone is the browser's (Europe/Berlin here) under the pages' strict
    CSP; without, it stays UTC."""
    if backend.name != "sqlite":
        pytest.skip("the page's script does not depend on the database engine; checked on SQLite")
    server = live_server(workers=1, threads=4)
    context = chromium.new_context(
        viewport={"width": PHONE[0], "height": PHONE[1]},
        timezone_id="Europe/Berlin",
        java_script_enabled=script,
    )
    try:
        page = context.new_page()
        problems = []
        page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
        login(page, server.url)
        page.goto(f"{server.url}/admin/schedules/new")
        if script:
            page.wait_for_function("document.querySelector('#timezone').value === 'Europe/Berlin'")
        else:
            assert page.locator("#timezone").input_value() == "UTC"
        assert problems == []
    finally:
        context.close()


def test_the_phone_header_is_compact_and_its_menu_works_without_javascript(backend, live_server, chromium):
    """At 390 px without script: the header is at most 120 px tall, every navigation link is on its one
    line (it scrolls sideways), and "Menu" opens the tools, whose language menu works."""
    if backend.name != "sqlite":
        pytest.skip("the header does not depend on the database engine; checked on SQLite")
    server = live_server(workers=1, threads=4)
    context = chromium.new_context(
        viewport={"width": PHONE[0], "height": PHONE[1]}, java_script_enabled=False
    )
    try:
        page = context.new_page()
        login(page, server.url)
        page.goto(f"{server.url}/admin/figures")
        assert page.locator("header.top").bounding_box()["height"] <= 120
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE[0]
        assert not page.locator("#locale-menu").is_visible()
        nav = page.locator("header.top nav")
        assert nav.evaluate("n => n.scrollWidth > n.clientWidth")  # more links than fit: they scroll
        page.get_by_role("link", name="Audit log").scroll_into_view_if_needed()
        page.get_by_role("link", name="Audit log").click()
        page.wait_for_url(f"{server.url}/admin/audit")
        page.get_by_role("link", name="Menu").click()
        assert page.locator("#locale-menu").is_visible()
        screenshot(page, "phone-menu-open")
        page.locator("#locale-menu").select_option("de")
        page.get_by_role("button", name="Change language").click()
        page.wait_for_url(f"{server.url}/admin/audit")
        assert page.locator("h1").inner_text() == "Audit-Protokoll"
        assert not page.locator("#locale-menu").is_visible()  # the menu closed with the new page
    finally:
        context.close()
