"""The jobs list's search form: the query string read into a ``JobSearch``, each bad field with a message
of its own (shown beside it; nothing is searched until every field is right). Producers search their own
jobs only, and only admins may search error text (docs/console.md#search)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

from babel.dates import format_datetime
from flask_babel import get_locale, get_timezone
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from werkzeug.datastructures import MultiDict

from queuelog.inputs import ascii_int
from queuelog.models import PRIORITIES, STATUSES
from queuelog.queue import JobSearch
from queuelog.queue.console import (
    PATH_KEYS,
    SEARCH_NAME_CHARS,
    SEARCH_TEXT_CHARS,
    payload_path,
    unpaired,
)
from queuelog.queue.stats import ErrorGroup, QueueStats
from queuelog.web.context import queue

FIELDS = (
    "id",
    "batch",
    "owner",
    "worker",
    "type",
    "priority",
    "status",
    "created_from",
    "created_to",
    "finished_from",
    "finished_to",
    "error",
    "path",
    "value",
    "group",
)
ADMIN_ONLY = ("owner", "error", "group")
# The fields' names as the jobs list's search form shows them (templates/jobs/list.html).
LABELS = {
    "id": _l("Job number"),
    "batch": _l("Batch number"),
    "status": _l("Status"),
    "type": _l("Type"),
    "priority": _l("Priority"),
    "owner": _l("Owner"),
    "worker": _l("Worker"),
    "created_from": _l("Created from"),
    "created_to": _l("Created before"),
    "finished_from": _l("Finished from"),
    "finished_to": _l("Finished before"),
    "error": _l("Error contains"),
    "path": _l("Payload field"),
    "value": _l("Payload value"),
    "group": _l("Error group"),
}
_LOCAL_TIME = re.compile(r"(\d{4})-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?", re.ASCII)


class ParsedSearch(NamedTuple):
    """The search, the problems by field (empty when it may run), the fields as given (to fill the form
    and the links again), and the error group it is limited to (``group``: None when none or unknown)."""

    search: JobSearch
    errors: dict[str, str]
    query: dict[str, str]
    group: ErrorGroup | None = None


def parse_search(args: MultiDict, *, admin: bool, username: str) -> ParsedSearch:
    """Read the search fields of ``args``; a producer's search is always limited to ``username``'s jobs."""
    query = {name: args.get(name, "").strip() for name in FIELDS}
    query = {k: v for k, v in query.items() if v and (admin or k not in ADMIN_ONLY)}
    errors: dict[str, str] = {}
    found: dict = {}
    for name, text in query.items():
        try:
            found.update(_field(name, text))
        except ValueError as exc:
            errors[name] = str(exc)
    missing = unpaired("path" in query, "value" in query)
    if missing:
        errors.setdefault(missing, _("Give both a payload field and its value."))
    if not admin:
        found["owner"] = username
    group = None
    if "group" in found:  # exactly the group's jobs: those the errors page lists under it
        group = QueueStats(queue()).error_group(found.pop("group"))
        found["ids"] = tuple(sorted(group.jobs)) if group else ()  # an unknown group: no job
    return ParsedSearch(JobSearch(**found), errors, query, group)


def search_terms(parsed: ParsedSearch) -> list[tuple[str, str]]:
    """The search in the page's language, field by field: (the field's name, its value as shown), with
    statuses and priorities translated and times in the locale's format (a bulk action's confirmation)."""
    terms = []
    for name, text in parsed.query.items():
        value = text
        if name in ("status", "priority") and text in (*STATUSES, *PRIORITIES):
            value = _(text)
        elif name.endswith(("_from", "_to")) and _LOCAL_TIME.fullmatch(text):
            value = format_datetime(datetime.fromisoformat(text), "short", locale=get_locale())
        elif name == "group":
            value = f"{parsed.group.type}: {parsed.group.signature}" if parsed.group else "—"
        terms.append((str(LABELS[name]), value))
    return terms


def _name(text: str) -> str:
    if len(text) > SEARCH_NAME_CHARS:
        raise ValueError(_("Use at most %(max)d characters.", max=SEARCH_NAME_CHARS))
    return text


def _field(name: str, text: str) -> dict:
    """One field's contribution to the JobSearch; raises ValueError with the message for the page."""
    if name == "id":
        number = ascii_int(text.lstrip("#"))
        if number is None:
            raise ValueError(_("Enter a job number (digits 0 to 9 only)."))
        return {"id": number}
    if name == "batch":
        number = ascii_int(text.lstrip("#"))
        if number is None:
            raise ValueError(_("Enter a batch number (digits 0 to 9 only)."))
        return {"batch_id": number}  # a batch's members (docs/batches.md), through an index
    if name in ("owner", "type"):
        return {name: _name(text)}
    if name == "group":
        return {"group": text[:SEARCH_NAME_CHARS]}
    if name == "worker":
        return {"worker": _name(text)}
    if name == "priority":
        if text not in PRIORITIES:
            raise ValueError(_("Choose a priority from the list."))
        return {"priority": PRIORITIES[text]}
    if name == "status":
        if text not in STATUSES:
            raise ValueError(_("Choose a status from the list."))
        return {"status": text}
    if name.endswith(("_from", "_to")):
        return {name: _local_time(text)}
    if name == "error":
        if len(text) > SEARCH_TEXT_CHARS:
            raise ValueError(_("Use at most %(max)d characters.", max=SEARCH_TEXT_CHARS))
        return {"error": text}
    if name == "path":
        keys = payload_path(text)
        if keys is None:
            raise ValueError(
                _(
                    "Write the field's keys separated by dots, such as customer.email: at most %(keys)d keys, none empty, without quotes or backslashes.",
                    keys=PATH_KEYS,
                )
            )
        return {"payload_path": keys}
    if len(text) > SEARCH_TEXT_CHARS:  # value
        raise ValueError(_("Use at most %(max)d characters.", max=SEARCH_TEXT_CHARS))
    return {"payload_value": text}


def _local_time(text: str) -> datetime:
    """A date and time in the person's time zone (as a datetime-local field sends it), made UTC."""
    match = _LOCAL_TIME.fullmatch(text)
    message = _("Enter a date and time between the years 2000 and 9000, such as 2026-12-01T09:30.")
    if match is None or not 2000 <= int(match.group(1)) <= 9000:
        raise ValueError(message)
    try:
        local = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(str(get_timezone())))
        return local.astimezone(UTC)
    except (ValueError, OverflowError):  # 2026-02-30, 25:00
        raise ValueError(message) from None
