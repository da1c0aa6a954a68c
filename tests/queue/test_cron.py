"""The slots of cron expressions and intervals (queuelog/queue/cron.py), daylight saving time included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from queuelog.queue import Code
from queuelog.queue.cron import Timing, cron_refusal, place_zone, slot_after, upcoming, zone, zone_names

NY = ZoneInfo("America/New_York")


def local(slots: list[datetime]) -> list[str]:
    return [slot.astimezone(NY).isoformat() for slot in slots]


def test_spring_forward_skips_the_slot_that_does_not_exist():
    # 2026-03-08: 02:00 EST becomes 03:00 EDT in New York, so 02:30 does not happen that day.
    slots = upcoming(Timing("30 2 * * *", None, "America/New_York"), datetime(2026, 3, 7, 12, tzinfo=NY), 3)
    assert local(slots) == [
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
        "2026-03-11T02:30:00-04:00",
    ]


def test_fall_back_fires_a_repeated_time_once():
    # 2026-11-01: 02:00 EDT becomes 01:00 EST, so 01:30 happens twice that day; it fires at the first.
    slots = upcoming(Timing("30 1 * * *", None, "America/New_York"), datetime(2026, 10, 31, 12, tzinfo=NY), 3)
    assert local(slots) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
        "2026-11-03T01:30:00-05:00",
    ]


def test_every_half_hour_across_both_changes():
    spring = upcoming(Timing("*/30 * * * *", None, "America/New_York"), datetime(2026, 3, 8, 1, tzinfo=NY), 3)
    assert local(spring) == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]
    fall = upcoming(Timing("*/30 * * * *", None, "America/New_York"), datetime(2026, 11, 1, 1, tzinfo=NY), 3)
    assert local(fall) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T02:30:00-05:00",
    ]


def test_a_time_inside_the_repeated_hour_does_not_go_back():
    second_pass = datetime(2026, 11, 1, 6, 15, tzinfo=UTC)  # 01:15 EST, after 01:30 EDT has passed
    assert local([slot_after(Timing("30 1 * * *", None, "America/New_York"), second_pass)]) == [
        "2026-11-02T01:30:00-05:00"
    ]


def test_intervals_count_real_seconds_from_the_slot_before():
    timing = Timing(None, 3600, "America/New_York")
    base = datetime(2026, 11, 1, 4, 30, tzinfo=UTC)
    assert upcoming(timing, base, 3, base) == [base + timedelta(hours=h) for h in (1, 2, 3)]
    late = base + timedelta(hours=5, minutes=10)
    assert slot_after(timing, late, base) == base + timedelta(hours=6)


def test_cron_refusals():
    assert cron_refusal("@weekly") is None and cron_refusal(" 0 12 * * 1-5 ") is None
    for expression, code in [
        ("0 12 * * * *", Code.CRON_FIELDS),
        ("@sometimes", Code.CRON_FIELDS),
        ("0 24 * * *", Code.CRON_INVALID),
        ("0 0 30 2 *", Code.CRON_INVALID),
    ]:
        refusal = cron_refusal(expression)
        assert refusal is not None and (refusal.code, refusal.field) == (code, "cron"), expression
    assert cron_refusal("0 0 30 2 *").params == {"reason": "Bad day-of-month"}


def test_a_schedule_names_a_place_or_utc():
    names = zone_names()
    assert names[-1] == "UTC" and {"Europe/Berlin", "America/New_York", "Asia/Kolkata"} <= set(names)
    for name in ("localtime", "Factory", "posixrules", "right/UTC", "posix/UTC", "EST", "CET", "GMT",
                 "Etc/UTC", "Etc/GMT+5", "", " UTC", "Europe/Nowhere"):  # fmt: skip
        assert name not in names and place_zone(name) is None, name
    assert place_zone("Europe/Berlin") == ZoneInfo("Europe/Berlin") and place_zone("UTC") == ZoneInfo("UTC")
    assert zone("EST") is not None  # a schedule saved with it before keeps its fire times
