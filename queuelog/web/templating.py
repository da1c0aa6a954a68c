"""Template helpers: times, ages and numbers in the person's locale and zone; the language menu."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flask import Flask, request, session
from flask_babel import (
    format_datetime,
    format_decimal,
    format_percent,
    format_time,
    format_timedelta,
    get_locale,
)
from flask_login import current_user

from queuelog.i18n import HTML_LANG, LANGUAGES
from queuelog.models import utcnow


def _when(value: datetime | None, style: str = "medium") -> str:
    return "—" if value is None else format_datetime(value, style)


def _clock(value: datetime | None) -> str:
    return "—" if value is None else format_time(value, "short")


def _age(value: datetime | None) -> str:
    """ "3 minutes ago" / "in 5 minutes", in the page's language."""
    if value is None:
        return "—"
    return format_timedelta(value - utcnow(), add_direction=True, granularity="second", threshold=0.9)


def _number(value) -> str:
    return format_decimal(value)


def _progress(value: int) -> str:
    """A progress of 0..100 as the page's language writes a percentage ("40 %" in German)."""
    return format_percent(value / 100)


def attempts(job: Mapping[str, Any]) -> tuple[int, int]:
    """Attempts made and attempts allowed. ``retry_count`` counts the failed attempts that were retried, so a
    running or finished job adds the attempt under way or last made; ``max_retries`` retries follow the
    first attempt."""
    made = job["retry_count"] + (1 if job["status"] in ("running", "completed", "failed") else 0)
    return made, job["max_retries"] + 1


def _attempts(job: Mapping[str, Any]) -> str:
    """ "2 / 4": attempts made of those allowed."""
    made, allowed = attempts(job)
    return f"{format_decimal(made)} / {format_decimal(allowed)}"


def error_headline(text: str | None) -> str | None:
    """The line that stands for a long error where many are listed: its last non-blank line (a Python
    traceback names the exception there). None when the error is short enough to be shown whole."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(lines) <= 3 and len(text or "") <= 240:
        return None
    return lines[-1]


def _pretty_json(value) -> str:
    """JSON for people: indented, non-ASCII kept (autoescaping still applies where it is shown). A job's
    payload and result come as the JSON text the database keeps; anything else as a value."""
    if isinstance(value, str):
        value = json.loads(value)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _timezone_known() -> bool:
    """Whether the person's zone is known; if not, a small script asks the browser for it (once)."""
    if getattr(current_user, "is_authenticated", False) and current_user.timezone:
        return True
    return "timezone" in session


def register_templating(app: Flask) -> None:
    app.jinja_env.filters.update(
        clock=_clock,
        when=_when,
        age=_age,
        number=_number,
        progress_percent=_progress,  # monitor.py has "percent" for ratios
        pretty_json=_pretty_json,
        attempts=_attempts,
        error_headline=error_headline,
    )

    @app.context_processor
    def _globals():
        locale = str(get_locale())
        return {
            "languages": LANGUAGES,
            "current_locale": locale,
            "html_lang": HTML_LANG.get(locale, "en"),
            "here": request.full_path.rstrip("?") if request else "/",
            "timezone_known": _timezone_known(),
        }
