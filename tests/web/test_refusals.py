"""Refused requests about users and keys are worded in the page's language, beside the right field."""

from __future__ import annotations

import re

import pytest

from queuelog.queue.admin import AdminStore

LAST_ADMIN = {
    "en": "There must be at least one active admin.",
    "pt_BR": "É preciso haver pelo menos um administrador ativo.",
    "de": "Es muss mindestens einen aktiven Administrator geben.",
    "zh_Hans": "必须至少保留一名有效的管理员。",
}
NEEDS_USER = {
    "en": "A producer key acts for a user: choose one.",
    "pt_BR": "Uma chave de produtor age em nome de um usuário: escolha um.",
    "de": "Ein Produzenten-Schlüssel handelt für einen Benutzer: wähle einen aus.",
    "zh_Hans": "生产者密钥代表某个用户操作：请选择一个用户。",
}


def _in_language(browser, locale: str):
    browser.submit("/", "/language", locale=locale, next="/")
    return browser


@pytest.mark.parametrize("locale", ["en", "pt_BR", "de", "zh_Hans"])
def test_last_admin_refusal_is_translated(admin_browser, locale):
    b = _in_language(admin_browser, locale)
    assert b.submit("/admin/users", "/admin/users/admin/deactivate").status_code == 302
    html = b.get("/admin/users").get_data(as_text=True)
    assert LAST_ADMIN[locale] in html
    if locale != "en":
        assert "active admin" not in html
    assert 'class="badge badge-completed"' in html  # still active


@pytest.mark.parametrize("locale", ["en", "pt_BR", "de", "zh_Hans"])
def test_producer_key_without_a_user_is_refused_beside_the_user_field(admin_browser, locale):
    b = _in_language(admin_browser, locale)
    page = b.submit("/admin/keys", name="orphan", kind="producer", user="")
    html = page.get_data(as_text=True)
    assert page.status_code == 422
    assert re.search(r'id="user-error">' + re.escape(NEEDS_USER[locale]), html)
    assert 'id="name-error"' not in html and "--user" not in html


def test_a_revoked_keys_name_can_be_given_to_a_new_key(app, admin_browser):
    db = app.extensions["queuelog"]["db"]
    first = admin_browser.submit("/admin/keys", name="builder-1", kind="worker", user="")
    old_key = re.search(r'id="new-key">(ql_[^<]+)<', first.get_data(as_text=True)).group(1)
    taken = admin_browser.submit("/admin/keys", name="builder-1", kind="worker", user="")
    assert taken.status_code == 422
    assert re.search(
        r'id="name-error">A key named builder-1 is in use\. Revoke it first', taken.get_data(as_text=True)
    )
    admin_browser.submit("/admin/keys", "/admin/keys/builder-1/revoke")
    second = admin_browser.submit("/admin/keys", name="builder-1", kind="worker", user="")
    assert second.status_code == 200
    new_key = re.search(r'id="new-key">(ql_[^<]+)<', second.get_data(as_text=True)).group(1)
    assert AdminStore(db).authenticate(old_key) is None
    assert AdminStore(db).authenticate(new_key).name == "builder-1"
    listing = admin_browser.get("/admin/keys").get_data(as_text=True)
    assert len(re.findall(r'<td [^>]*class="data">builder-1</td>', listing)) == 2  # the revoked row stays
    assert listing.count('action="/admin/keys/builder-1/revoke"') == 1  # only the key in use


def test_existing_user_is_refused_in_the_pages_language(admin_browser):
    b = _in_language(admin_browser, "de")
    assert b.submit("/admin/users", username="carol", role="producer", password="carol-password")
    again = b.submit("/admin/users", username="carol", role="producer", password="carol-password")
    assert again.status_code == 422
    assert 'id="username-error">Es gibt schon einen Benutzer namens carol.' in again.get_data(as_text=True)


def test_reset_for_an_unknown_user_is_refused_in_the_pages_language(admin_browser):
    b = _in_language(admin_browser, "pt_BR")
    b.submit("/admin/users", "/admin/users/nobody/password", password="long-enough-1")
    assert "Não há usuário chamado nobody." in b.get("/admin/users").get_data(as_text=True)
