"""The pages in English, Brazilian Portuguese, German and Simplified Chinese."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from flask_babel import force_locale, format_datetime, format_decimal

from tests.conftest import ADMIN_PASSWORD, ROOT, Browser

TRANSLATIONS = ROOT / "queuelog" / "translations"
LOCALES = ["pt_BR", "de", "zh_Hans"]
PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")


def extracted_messages() -> dict[str, object]:
    """Every message id in the code and templates, extracted as `pybabel extract -F babel.cfg` would."""
    method_map = [("queuelog/**.py", "python"), ("templates/**.html", "jinja2")]
    keywords = {"_": None, "gettext": None, "ngettext": (1, 2), "_l": None, "lazy_gettext": None, "N_": None}
    found = {}
    for _filename, _lineno, message, _comments, _context in extract_from_dir(
        str(ROOT), method_map=method_map, keywords=keywords
    ):
        key = message[0] if isinstance(message, tuple) else message
        found[key] = message
    return found


def catalog(locale: str):
    with (TRANSLATIONS / locale / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        return read_po(fh, locale=locale)


@pytest.mark.parametrize("locale", LOCALES)
def test_every_message_is_translated_with_the_same_placeholders(locale):
    messages = extracted_messages()
    assert len(messages) > 150
    cat = catalog(locale)
    problems = []
    for key, message in messages.items():
        entry = cat.get(message)
        if entry is None or not entry.string:
            problems.append(f"missing: {key!r}")
            continue
        if entry.fuzzy:
            problems.append(f"fuzzy: {key!r}")
        originals = message if isinstance(message, tuple) else (message,)
        strings = entry.string if isinstance(entry.string, tuple) else (entry.string,)
        if not all(strings):
            problems.append(f"empty plural form: {key!r}")
        wanted = set(PLACEHOLDER.findall(originals[-1]))
        for text in strings:
            if set(PLACEHOLDER.findall(text)) != wanted:
                problems.append(f"placeholders differ: {key!r} -> {text!r}")
    assert problems == []


def test_the_catalog_check_catches_a_new_untranslated_string(tmp_path, monkeypatch):
    """Proof that the check above can fail: a template with a new string is reported as missing."""
    template = ROOT / "templates" / "zz_check_untranslated.html"
    template.write_text("{{ _('A brand new sentence nobody translated') }}")
    try:
        messages = extracted_messages()
        assert "A brand new sentence nobody translated" in messages
        assert catalog("de").get("A brand new sentence nobody translated") is None
    finally:
        template.unlink()


def _lang_of(html: str) -> str:
    return re.search(r'<html lang="([^"]+)"', html).group(1)


@pytest.mark.parametrize(
    "header,lang,title",
    [
        ("de-DE,de;q=0.9", "de", "Anmelden"),
        ("pt-BR,pt;q=0.9,en;q=0.5", "pt-BR", "Entrar"),
        ("zh-CN,zh;q=0.9", "zh-Hans", "登录"),
        ("fr-FR,fr;q=0.9", "en", "Log in"),
        ("", "en", "Log in"),
    ],
)
def test_accept_language_chooses_the_page_language(client, header, lang, title):
    html = client.get("/login", headers={"Accept-Language": header} if header else {}).get_data(as_text=True)
    assert _lang_of(html) == lang
    assert f"<h1>{title}</h1>" in html


def test_language_menu_overrides_the_header_and_sticks_across_requests_and_logins(app):
    german_browser = {"Accept-Language": "de"}
    b = Browser(app.test_client())
    b.client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "de"
    page = b.get("/login").get_data(as_text=True)
    assert _lang_of(page) == "de"
    b.submit("/login", "/language", locale="zh_Hans", next="/login")
    assert _lang_of(b.get("/login", headers=german_browser).get_data(as_text=True)) == "zh-Hans"
    b.login("admin", ADMIN_PASSWORD)
    assert "仪表盘" in b.get("/", headers=german_browser).get_data(as_text=True)  # kept through the login
    b.submit("/", "/language", locale="pt_BR", next="/")  # saved in the profile now
    other = Browser(app.test_client())
    other.client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "de"
    other.login("admin", ADMIN_PASSWORD)
    html = other.get("/").get_data(as_text=True)
    assert _lang_of(html) == "pt-BR" and "Painel" in html


FIXED = datetime(2026, 1, 31, 13, 5, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    "locale,zone,when,number",
    [
        ("en", "UTC", "Jan 31, 2026, 1:05:09\u202fPM", "1,234,567.891"),
        ("pt_BR", "America/Sao_Paulo", "31 de jan. de 2026 10:05:09", "1.234.567,891"),
        ("de", "Europe/Berlin", "31.01.2026, 14:05:09", "1.234.567,891"),
        ("zh_Hans", "Asia/Shanghai", "2026年1月31日 21:05:09", "1,234,567.891"),
    ],
)
def test_dates_and_numbers_follow_the_locale_and_zone(app, locale, zone, when, number):
    with app.test_request_context("/"):
        from flask import session

        session["timezone"] = zone
        with force_locale(locale):
            assert format_datetime(FIXED, "medium") == when
            assert format_decimal(1234567.891) == number


def test_job_times_are_shown_in_the_persons_zone(admin_browser, producer):
    job = producer.post("/jobs", json={"type": "email"}).json
    created = datetime.fromisoformat(job["created_at"])
    admin_browser.submit("/settings", "/timezone", timezone="Asia/Tokyo", next="/settings")
    html = admin_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    tokyo_hour = (created.hour + 9) % 24
    hour12 = tokyo_hour % 12 or 12
    assert re.search(rf"\b{hour12}:{created.minute:02d}:\d\d", html)


def test_pages_are_translated_from_the_catalogs_without_compiling_them(app, client):
    """A checkout serves its .po files as they are (queuelog/i18n.py): no .mo is written at start-up."""
    for locale, words in (("pt_BR", "Entrar"), ("de", "Anmelden"), ("zh_Hans", "登录")):
        page = client.get("/login", headers={"Accept-Language": locale.replace("_", "-")})
        assert words in page.get_data(as_text=True), locale
    assert list(TRANSLATIONS.glob("*/LC_MESSAGES/*.mo")) == []
