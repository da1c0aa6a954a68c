"""Which language and time zone a page is shown in."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from zoneinfo import available_timezones

from flask import request, session
from flask_login import current_user

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


@lru_cache(maxsize=1)
def timezone_choices() -> tuple[str, ...]:
    """The zones a person may choose: the IANA "Area/Location" names, and UTC. Not "Factory",
    "localtime" or "posixrules", which exist on disk but are no place anyone lives in."""
    areas = (z for z in available_timezones() if "/" in z and not z.startswith(("Etc/", "SystemV/")))
    return (*sorted(areas), "UTC")


def valid_timezone(name: str) -> bool:
    """Is ``name`` one of ``timezone_choices()``?"""
    return name in _timezone_set()


@lru_cache(maxsize=1)
def _timezone_set() -> frozenset[str]:
    return frozenset(timezone_choices())


def compile_catalogs(folder: Path) -> None:
    """In a checkout, build each ``messages.mo`` from its ``messages.po`` when it is missing or older (at
    start-up, so that a fresh checkout needs no build step; a few stat calls when nothing changed). An
    installed wheel carries only the ``.mo`` files, compiled by its build (setup.py): there is nothing to
    do and nothing is written into the installed package. Written to a temporary file and renamed:
    processes starting together never read half a catalog."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    for po in folder.glob("*/LC_MESSAGES/messages.po"):
        mo = po.with_suffix(".mo")
        if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        with po.open("rb") as fh:
            catalog = read_po(fh, locale=po.parent.parent.name)
        tmp = mo.with_name(f".messages.{os.getpid()}.mo")
        with tmp.open("wb") as fh:
            write_mo(fh, catalog)
        os.replace(tmp, mo)
