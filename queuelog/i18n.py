"""Which language and time zone a page is shown in, and the catalogs that translate the pages."""

from __future__ import annotations

import io
import threading
from functools import cached_property
from pathlib import Path

from babel import support
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from flask import request, session
from flask_babel import Babel, Domain, get_locale
from flask_login import current_user

from queuelog.paths import TRANSLATIONS
from queuelog.queue.cron import place_zone, zone_names

# Locale code -> the language's own name (shown in the language menu).
LANGUAGES = {"en": "English", "pt_BR": "Português (Brasil)", "de": "Deutsch", "zh_Hans": "简体中文"}
# Accept-Language tags we understand, mapped to our locales (best_match compares them case-insensitively).
_TAGS = {
    "en": "en",
    "en-us": "en",
    "en-gb": "en",
    "pt-br": "pt_BR",
    "pt": "pt_BR",
    "pt-pt": "pt_BR",
    "de": "de",
    "de-de": "de",
    "de-at": "de",
    "de-ch": "de",
    "zh-cn": "zh_Hans",
    "zh-hans": "zh_Hans",
    "zh-sg": "zh_Hans",
    "zh": "zh_Hans",
    "zh-hans-cn": "zh_Hans",
}
HTML_LANG = {"en": "en", "pt_BR": "pt-BR", "de": "de", "zh_Hans": "zh-Hans"}


def select_locale() -> str:
    """The person's saved choice, then the browser's Accept-Language, then English."""
    if getattr(current_user, "is_authenticated", False) and current_user.locale in LANGUAGES:
        return current_user.locale
    chosen = session.get("locale")
    if chosen in LANGUAGES:
        return chosen
    best = request.accept_languages.best_match(list(_TAGS))
    return _TAGS.get(best.lower(), "en") if best else "en"


def select_timezone() -> str:
    """The person's saved zone, else the one the browser reported (kept in the session), else UTC."""
    for zone in (
        getattr(current_user, "timezone", None) if getattr(current_user, "is_authenticated", False) else None,
        session.get("timezone"),
    ):
        if zone and valid_timezone(zone):
            return zone
    return "UTC"


def timezone_choices() -> tuple[str, ...]:
    """The zones a person may choose: those a schedule may name (``queuelog.queue.cron.zone_names``), the
    IANA "Area/Location" names and UTC. Not "Factory", "localtime" or "posixrules", which exist on disk
    but are no place anyone lives in."""
    return zone_names()


def valid_timezone(name: str) -> bool:
    """Is ``name`` one of ``timezone_choices()``?"""
    return place_zone(name) is not None


class Catalogs(Domain):
    """The translations of the pages, one catalog per locale, read when a page first needs it.

    An installed wheel carries each catalog compiled (``messages.mo``, made by its build: setup.py) and no
    ``.po``: that is read as it is. A checkout has the ``messages.po`` that translators edit: it is parsed
    into memory, so that a fresh checkout needs no build step and start-up writes nothing, and an edited
    catalog shows at the next start. A locale without a catalog (English) translates nothing."""

    def __init__(self, folder: Path) -> None:
        super().__init__([str(folder)])
        self.folder = folder
        self._lock = threading.Lock()

    def get_translations(self) -> support.NullTranslations:
        """The current request's catalog (none outside a request)."""
        locale = get_locale()
        if locale is None:
            return support.NullTranslations()
        key = str(locale)
        translations = self.cache.get(key)
        if translations is None:
            with self._lock:  # threads of one process parse a catalog once
                translations = self.cache.get(key)
                if translations is None:
                    translations = self.cache[key] = load_catalog(self.folder, key)
        return translations


def load_catalog(folder: Path, locale: str) -> support.NullTranslations:
    """The catalog of ``locale`` under ``folder``: from its ``messages.po`` when there is one (a checkout),
    else from its compiled ``messages.mo`` (a wheel), else an empty one. Reads only; writes nothing."""
    po = folder / locale / "LC_MESSAGES" / "messages.po"
    if po.is_file():
        with po.open("rb") as fh:
            catalog = read_po(fh, locale=locale)
        compiled = io.BytesIO()
        write_mo(compiled, catalog)  # fuzzy entries stay out, as in the wheel's compiled catalogs
        compiled.seek(0)
        return support.Translations(compiled)
    return support.Translations.load(str(folder), [locale])


class CatalogBabel(Babel):
    """Flask-Babel with ``Catalogs`` as its message domain."""

    @cached_property
    def domain_instance(self) -> Domain:
        return Catalogs(TRANSLATIONS)
