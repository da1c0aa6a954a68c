"""The pages in each language, in Chromium: no English left in the page chrome, Chinese text rendered."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from babel.messages.pofile import read_po

from tests.conftest import ADMIN_PASSWORD, ROOT
from tests.e2e.conftest import screenshot

LOCALES = {"de-DE": "de", "pt-BR": "pt_BR", "zh-CN": "zh_Hans"}
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]")


def english_fragments(locale: str) -> set[str]:
    """English text that must not be seen in a page in ``locale``: each message whose translation differs
    from it, cut at its placeholders; fragments too short to be telling are left out."""
    with (ROOT / "queuelog" / "translations" / locale / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        catalog = read_po(fh, locale=locale)
    fragments = set()
    translated = " | ".join(
        text for m in catalog if m.id for text in (m.string if isinstance(m.string, tuple) else (m.string,))
    )
    for message in catalog:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for english in ids:
            if english in strings:
                continue  # the same word in both languages (German "Status")
            for piece in PLACEHOLDER.split(english):
                piece = piece.strip(" .,:;…#()")
                if len(piece) >= 6 or (" " in piece and len(piece) >= 4):
                    # a proper name the translations keep ("JSON Schema") is not left-over English
                    if not re.search(rf"(?<!\w){re.escape(piece)}(?!\w)", translated):
                        fragments.add(piece)
    return fragments


def chrome_text(page) -> str:
    """What the page says, without the job data it shows (payloads, errors, type names, usernames)."""
    return page.evaluate(
        """() => {
            const clone = document.body.cloneNode(true);
            clone.querySelectorAll('pre, code, .type, .data, select option:not(:checked)').forEach(e => e.remove());
            return clone.innerText;
        }"""
    )


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_pages_are_fully_translated(
    app, keys, live_server, new_page, console, producer, worker, browser_locale, backend
):
    if backend.name != "sqlite":
        pytest.skip("the pages' language does not depend on the database engine; checked on SQLite")
    locale = LOCALES[browser_locale]
    server = live_server(workers=1, threads=4)
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0, "payload": {"n": 1}}).json
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "ValueError: 42"}
    )
    fragments = english_fragments(locale)

    page = new_page(locale=browser_locale)
    page.goto(f"{server.url}/login")
    page.locator("#username").fill("admin")
    page.locator("#password").fill(ADMIN_PASSWORD)
    page.locator("button.primary").click()
    page.wait_for_url(f"{server.url}/")

    def check(what: str) -> None:
        html_lang = page.evaluate("document.documentElement.lang")
        assert html_lang == {"de": "de", "pt_BR": "pt-BR", "zh_Hans": "zh-Hans"}[locale]
        text = chrome_text(page)
        left = sorted(f for f in fragments if re.search(rf"(?<!\w){re.escape(f)}(?!\w)", text))
        assert left == [], f"{what}: English left in the {locale} page: {left}"

    check("dashboard")
    screenshot(page, f"dashboard-{locale}")
    page.goto(f"{server.url}/submit")
    page.locator("#payload").fill("{oops")
    page.locator("form button.primary").click()
    assert page.locator("#payload-error").is_visible()
    check("submit form with an error")
    page.goto(f"{server.url}/admin/errors")
    check("errors page")
    for path in (
        "/queue",
        f"/queue/{job['id']}",
        "/admin/users",
        "/admin/keys",
        "/admin/types",
        "/admin/audit",
        "/admin/workers",
        "/admin/figures",
        "/settings",
    ):
        page.goto(server.url + path)
        check(path)
    assert console.problems == []


def test_chinese_text_has_a_font(app, backend, keys, live_server, new_page, tmp_path):
    """No missing-glyph boxes: a CJK font is installed, and Chromium draws the Chinese title with it."""
    if backend.name != "sqlite":
        pytest.skip("fonts do not depend on the database engine; checked on SQLite")
    fc_list = shutil.which("fc-list")
    assert fc_list, "fontconfig is missing"
    fonts = subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True).stdout
    assert fonts.strip(), "no font for Chinese is installed (apt-get install fonts-noto-cjk)"
    server = live_server(workers=1, threads=4)
    page = new_page(locale="zh-CN")
    page.goto(f"{server.url}/login")
    assert page.locator("h1").inner_text() == "登录"
    # A glyph the fonts lack is drawn as the same box for every character: draw two different characters
    # with the page's font and compare the pixels.
    same = page.evaluate(
        """() => {
            const font = getComputedStyle(document.querySelector('h1')).fontFamily;
            const draw = ch => {
                const canvas = document.createElement('canvas');
                canvas.width = canvas.height = 48;
                const c = canvas.getContext('2d');
                c.font = '40px ' + font;
                c.fillText(ch, 2, 40);
                return Array.from(c.getImageData(0, 0, 48, 48).data).join(',');
            };
            return draw('登') === draw('录');
        }"""
    )
    assert same is False
    screenshot(page, "login-zh_Hans")
