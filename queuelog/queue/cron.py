"""When a schedule fires: the slots of a cron expression in a time zone, or of a fixed interval.

Cron expressions are parsed and stepped by cronsim (docs/schedules.md says why that library). The
expression is stepped over local wall-clock times with no zone attached, and each wall-clock time is then
placed in the zone here, which gives the rules of docs/schedules.md (Daylight saving time):

- a wall-clock time the zone skips (spring forward) does not exist, so its slot is skipped;
- a wall-clock time the zone repeats (fall back) is one slot, at its first occurrence.

Intervals count in real seconds from the slot before, whatever the zone.

A schedule names a place's zone (``place_zone``): an IANA "Area/Location" name or UTC. Names that exist on
disk but are no place ("localtime", "posixrules", "Factory", "right/UTC", "EST", "Etc/GMT+5") are refused,
so that no schedule's fire times depend on a server's own settings (docs/schedules.md, Settings).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from queuelog.queue.errors import Code, JobValidationError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
# A wall-clock step that lands on no existing time (a gap) is passed over; the zone database has no gaps
# this long, so a loop that finds nothing within this many steps has an expression that cannot fire.
_MAX_STEPS = 1000


class Timing(NamedTuple):
    """How a schedule repeats: ``cron`` (five fields or an alias) in ``timezone``, or ``interval`` seconds."""

    cron: str | None
    interval: int | None
    timezone: str


def expand(expression: str) -> str:
    """The five fields an alias stands for; other expressions as they are (trimmed)."""
    text = expression.strip()
    return ALIASES.get(text.lower(), text)


def cron_refusal(expression: str, field: str = "cron") -> JobValidationError | None:
    """Why ``expression`` is not a usable cron expression, as a refusal naming ``field``; None if it is."""
    fields = expand(expression).split()
    if len(fields) != 5:
        return JobValidationError(Code.CRON_FIELDS, field=field)
    try:
        next(CronSim(" ".join(fields), datetime(2000, 1, 1)))
    except CronSimError as exc:
        return JobValidationError(Code.CRON_INVALID, field=field, reason=str(exc).rstrip("."))
    except StopIteration:
        return JobValidationError(Code.CRON_NEVER, field=field)
    return None


@lru_cache(maxsize=1)
def zone_names() -> tuple[str, ...]:
    """The zones a schedule may name (and a person may choose on the pages): the IANA "Area/Location"
    names, sorted, then UTC. Not "localtime", "posixrules" or "Factory" (files beside the zones, the first
    one the server's own zone), not "EST", "CET" or "GB" (old names without an area), not "Etc/..." (fixed
    offsets whose sign is the opposite of ISO's: "Etc/GMT+5" is five hours behind UTC; "Etc/UTC" is UTC),
    and not the "posix/" and "right/" copies of the database (the latter counts leap seconds)."""
    areas = (
        name
        for name in available_timezones()
        if "/" in name and not name.startswith(("Etc/", "SystemV/", "posix/", "right/"))
    )
    return (*sorted(areas), "UTC")


@lru_cache(maxsize=1)
def _zone_set() -> frozenset[str]:
    return frozenset(zone_names())


def place_zone(name: str) -> ZoneInfo | None:
    """The zone ``name`` if it is one of ``zone_names()``, else None: the one check of a schedule's zone
    for the API, the page and the command line alike."""
    return zone(name) if name in _zone_set() else None


def zone(name: str) -> ZoneInfo | None:
    """The zone stored as ``name``, or None when there is no such zone. This loads any name the zone
    database has, so that a schedule saved before ``place_zone`` was the check keeps its fire times; new
    names are checked with ``place_zone``."""
    if not name or name != name.strip() or len(name) > 64:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _exists(wall: datetime, tz: ZoneInfo) -> bool:
    """Whether the wall-clock time ``wall`` happens in ``tz`` (it does not inside a spring-forward gap)."""
    placed = wall.replace(tzinfo=tz)
    return placed.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def slot_after(timing: Timing, after: datetime, base: datetime | None = None) -> datetime | None:
    """The first slot strictly after ``after`` (aware), as an aware UTC time; None if there is none.

    An interval's slots are ``base + k * interval`` (k >= 1), or ``after + interval`` without a base."""
    if timing.interval is not None:
        step = timedelta(seconds=timing.interval)
        if base is None:
            return after + step
        k = max(1, math.floor((after - base) / step) + 1)
        return base + k * step
    tz = zone(timing.timezone)
    if tz is None or timing.cron is None:
        return None
    wall = after.astimezone(tz).replace(tzinfo=None)
    steps = CronSim(expand(timing.cron), wall)
    for _ in range(_MAX_STEPS):
        try:
            candidate = next(steps)
        except StopIteration:
            return None
        if not _exists(candidate, tz):
            continue  # inside a spring-forward gap: this slot does not exist
        placed = candidate.replace(tzinfo=tz, fold=0)  # a repeated time: its first occurrence only
        if placed > after:
            return placed.astimezone(UTC)
    return None


def upcoming(timing: Timing, after: datetime, count: int = 5, base: datetime | None = None) -> list[datetime]:
    """The next ``count`` slots after ``after``."""
    out: list[datetime] = []
    at: datetime | None = after
    while at is not None and len(out) < count:
        at = slot_after(timing, at, base if not out else out[-1])
        if at is not None:
            out.append(at)
    return out
