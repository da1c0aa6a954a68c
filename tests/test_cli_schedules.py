"""``flask schedules ...`` on both engines: add, list, pause, resume, run, remove; refusals are one line
on stderr with exit status 1; every change is in the audit log as ``cli``."""

from __future__ import annotations

import json

from sqlalchemy import select

from queuelog.models import AuditLog


def lines(result) -> list[list[str]]:
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_add_list_pause_resume_run_remove(runner, app):
    added = runner.invoke(args=["schedules", "add", "nightly", "--type", "email", "--cron", "30 2 * * *",
                                "--timezone", "America/New_York", "--payload", '{"to": "ops@example.com"}',
                                "--priority", "high"])  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert added.stdout.startswith("added schedule nightly (next 20")
    every = runner.invoke(args=["schedules", "add", "poll", "--type", "sync", "--every", "300", "--paused"])
    assert every.exit_code == 0 and every.stdout == "added schedule poll (paused)\n"
    listing = lines(runner.invoke(args=["schedules", "list"]))
    assert [row[:5] for row in listing] == [
        ["nightly", "active", "cron 30 2 * * * America/New_York", "email", "high"],
        ["poll", "paused", "every 300s", "sync", "low"],
    ]
    assert listing[0][5].endswith(":30:00Z") and listing[0][6] == "-" and listing[1][5] == "-"
    assert runner.invoke(args=["schedules", "pause", "nightly"]).stdout == "paused schedule nightly\n"
    resumed = runner.invoke(args=["schedules", "resume", "poll"])
    assert resumed.exit_code == 0 and resumed.stdout.startswith("resumed schedule poll (next 20")
    ran = runner.invoke(args=["schedules", "run", "nightly"])
    assert ran.exit_code == 0 and ran.stdout.startswith("enqueued job ")
    job = app.extensions["queuelog"]["queue"].get(int(ran.stdout.split()[2]))
    assert (job.owner, json.loads(job.payload), job.priority) == (
        "schedule:nightly",
        {"to": "ops@example.com"},
        20,
    )
    assert runner.invoke(args=["schedules", "remove", "poll"]).stdout == "removed schedule poll\n"
    assert [row[0] for row in lines(runner.invoke(args=["schedules", "list"]))] == ["nightly"]
    with app.extensions["queuelog"]["db"].session() as session:
        audit = [
            (a.actor, a.action, a.target)
            for a in session.scalars(
                select(AuditLog).where(AuditLog.action.startswith("schedule.")).order_by(AuditLog.id)
            )
        ]
    assert audit == [
        ("cli", "schedule.create", "nightly"),
        ("cli", "schedule.create", "poll"),
        ("cli", "schedule.pause", "nightly"),
        ("cli", "schedule.resume", "poll"),
        ("cli", "schedule.run", "nightly"),
        ("cli", "schedule.delete", "poll"),
    ]


def test_refusals_are_one_line_and_exit_1(runner, app):
    def refused(*args: str) -> str:
        result = runner.invoke(args=["schedules", *args])
        assert result.exit_code == 1 and result.stdout == "", (result.stdout, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        return result.stderr.strip()

    assert "cron: is not a valid cron expression" in refused(
        "add", "a", "--type", "email", "--cron", "61 * * * *"
    )
    assert "cron: must have five fields" in refused("add", "a", "--type", "email", "--cron", "* * *")
    assert "every: must be an integer from 1" in refused("add", "a", "--type", "email", "--every", "0")
    assert "every: must be an integer from 1" in refused("add", "a", "--type", "email", "--every", "-5")
    assert "timezone: is not an IANA time zone" in refused(
        "add", "a", "--type", "email", "--cron", "@daily", "--timezone", "Atlantis/Capital"
    )
    assert "type: unknown or disabled job type 'nope'" in refused(
        "add", "a", "--type", "nope", "--every", "60"
    )
    assert "payload: not JSON" in refused("add", "a", "--type", "email", "--every", "60", "--payload", "{")
    assert "payload: must be a JSON object" in refused(
        "add", "a", "--type", "email", "--every", "60", "--payload", "[]"
    )
    assert "give --cron or --every, one of them" in refused("add", "a", "--type", "email")
    assert "schedule 'nope' does not exist" in refused("pause", "nope")
    assert "schedule 'nope' does not exist" in refused("run", "nope")
    every_one = refused("add", "two words", "--type", "nope", "--every", "0", "--timezone", "Nowhere")
    assert every_one.startswith("Error: name: must be 1 to 55 letters"), every_one
    assert "; every: must be an integer from 1 to 31622400; timezone: is not an IANA time zone" in every_one
    assert every_one.endswith("; type: unknown or disabled job type 'nope'; allowed: email, pdf, sync")
    assert "schedule 'nope' does not exist" in refused("remove", "nope")
    assert runner.invoke(args=["schedules", "list"]).stdout == ""


def test_zones_that_are_no_place_and_crons_that_never_fire_are_refused(runner):
    def add(name: str, *args: str):
        return runner.invoke(args=["schedules", "add", name, "--type", "email", *args])

    for zone in ("localtime", "Factory", "posixrules", "right/UTC", "EST", "Etc/UTC", "Etc/GMT+5"):
        refused = add("a", "--cron", "@daily", "--timezone", zone)
        assert refused.exit_code == 1 and refused.stdout == "", zone
        assert refused.stderr.strip() == "Error: timezone: is not an IANA time zone (e.g. Europe/Berlin)", (
            zone
        )
    never = add("a", "--cron", "30 2 * 3 SUN#2", "--timezone", "America/New_York")
    assert never.exit_code == 1 and never.stderr.strip() == "Error: cron: never matches a date"
    for zone in ("Europe/Berlin", "America/New_York", "UTC"):
        added = add(zone.replace("/", "-"), "--cron", "@daily", "--timezone", zone)
        assert added.exit_code == 0 and added.stdout.startswith(f"added schedule {zone.replace('/', '-')}")
    listing = runner.invoke(args=["schedules", "list"]).stdout
    assert [line.split("\t")[0] for line in listing.splitlines()] == [
        "America-New_York",
        "Europe-Berlin",
        "UTC",
    ]
