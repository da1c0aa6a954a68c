"""``flask --app app schedules ...``: periodic jobs (docs/schedules.md), in the style of ``types`` and
``keys``. Changes are audited with the actor ``cli``. Automation relies on the output: keep it stable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from flask import current_app
from flask.cli import AppGroup

from queuelog.cli.rows import time_cell
from queuelog.models import PRIORITIES, PRIORITY_NAMES, Schedule
from queuelog.queue import Code, JobValidationError, QueueError
from queuelog.queue.errors import each_refusal
from queuelog.queue.inputs import DEFAULT_MAX_RETRIES, MAX_RETRIES_LIMIT, check_document, read_json
from queuelog.queue.schedules import MISSED_POLICIES, Schedules, ScheduleValues

schedules_cli = AppGroup("schedules", help="Periodic jobs: cron expressions or fixed intervals.")


def _schedules() -> Schedules:
    return current_app.extensions["queuelog"]["schedules"]


def timing_text(schedule: Schedule) -> str:
    """``cron <expression> <zone>`` or ``every <n>s``."""
    if schedule.cron is not None:
        return f"cron {schedule.cron} {schedule.timezone}"
    return f"every {schedule.interval_seconds}s"


# The command line's words for the schedules' refusals (queuelog/queue/errors.py): they name its options.
WORDS: dict[Code, Callable[[dict[str, Any]], str]] = {
    Code.SCHEDULE_NOT_FOUND: lambda p: f"schedule {p['name']!r} does not exist",
    Code.SCHEDULE_CHANGING: lambda p: f"schedule {p['name']!r} kept changing; try again",
    Code.SCHEDULE_EXISTS: lambda p: "a schedule with this name exists",
    Code.BAD_SCHEDULE_NAME: lambda p: (
        f"must be 1 to {p['max_length']} letters, digits, '_', '.' or '-', starting with a letter or digit"
    ),
    Code.TIMING_NEEDED: lambda p: "give --cron or --every, one of them",
    Code.CRON_FIELDS: lambda p: (
        "must have five fields (minute hour day month weekday) "
        "or be @hourly, @daily, @weekly, @monthly or @yearly"
    ),
    Code.CRON_INVALID: lambda p: f"is not a valid cron expression: {p['reason']}",
    Code.CRON_NEVER: lambda p: "never matches a date",
    Code.INTERVAL_OUT_OF_RANGE: lambda p: f"must be an integer from 1 to {p['max']}",
    Code.UNKNOWN_TIMEZONE: lambda p: "is not an IANA time zone (e.g. Europe/Berlin)",
    Code.BAD_MISSED_POLICY: lambda p: f"must be {' or '.join(p['allowed'])}",
}
_OPTIONS = {"interval_seconds": "every"}  # fields the command line names otherwise


def _wording(refusal: QueueError) -> str:
    """A refusal in the command line's words: ``option: message``, or the message alone for the
    schedule as a whole and for the missing timing (its words name both options)."""
    if refusal.code in WORDS:
        message = WORDS[refusal.code](refusal.params)
    else:  # a type or payload refused as an enqueue refuses it: the JSON API's English words
        from queuelog.api.refusals import TABLE

        message = TABLE[refusal.code].words(refusal.params)
    if refusal.field is None or refusal.code is Code.TIMING_NEEDED:
        return message
    return f"{_OPTIONS.get(refusal.field, refusal.field)}: {message}"


def _refused(exc: QueueError) -> click.ClickException:
    """One line for every refusal at once (exit status 1)."""
    return click.ClickException("; ".join(_wording(r) for r in each_refusal(exc)))


def _payload(text: str) -> dict[str, Any]:
    """The payload given on the command line, within the payload limits of the API."""
    try:
        value = read_json(text, "payload")
    except JobValidationError as exc:  # a number that would read as 0 (1e-400)
        raise _refused(exc) from None
    except ValueError as exc:
        raise click.ClickException(f"payload: not JSON: {exc}") from None
    except RecursionError:
        raise click.ClickException("payload: nested too deeply") from None
    config = current_app.config["QUEUELOG"]
    try:
        check_document(
            value, "payload", max_bytes=config["MAX_PAYLOAD_BYTES"], max_depth=config["MAX_PAYLOAD_DEPTH"]
        )
    except JobValidationError as exc:
        raise _refused(exc) from None
    return value


@schedules_cli.command("add")
@click.argument("name")
@click.option("--type", "job_type", required=True, help="The job type of the jobs it makes.")
@click.option(
    "--cron",
    help="Five fields (minute hour day month weekday), or @hourly, @daily, @weekly, @monthly, @yearly.",
)
@click.option("--every", "interval", type=int, help="A fixed interval in seconds instead of --cron.")
@click.option("--timezone", default="UTC", show_default=True, help="The IANA time zone of --cron.")
@click.option("--payload", default="{}", show_default=True, help="The jobs' payload, a JSON object.")
@click.option("--priority", type=click.Choice(list(PRIORITIES)), default="low", show_default=True)
@click.option(
    "--max-retries",
    type=click.IntRange(0, MAX_RETRIES_LIMIT),
    default=DEFAULT_MAX_RETRIES,
    show_default=True,
)
@click.option("--missed", type=click.Choice(MISSED_POLICIES), default="fire_once", show_default=True,
              help="After downtime: one job for the missed slots, or none.")  # fmt: skip
@click.option("--paused", is_flag=True, help="Add it paused.")
def schedules_add(
    name, job_type, cron, interval, timezone, payload, priority, max_retries, missed, paused
) -> None:
    """Add a schedule; prints its next fire time (UTC)."""
    values = ScheduleValues(
        name,
        job_type,
        _payload(payload),
        PRIORITIES[priority],
        max_retries,
        cron,
        interval,
        timezone,
        missed,
        paused,
    )
    try:
        schedule = _schedules().add(values, "cli")
    except JobValidationError as exc:
        raise _refused(exc) from None
    state = "paused" if schedule.paused else f"next {time_cell(schedule.next_fire_at)}"
    click.echo(f"added schedule {name} ({state})")


@schedules_cli.command("list")
def schedules_list() -> None:
    """List schedules: name, state, timing, type, priority, next and last fire time (UTC), tab-separated."""
    for s in _schedules().all():
        state = "paused" if s.paused else "active"
        times = (time_cell(None if s.paused else s.next_fire_at), time_cell(s.last_fire_at))
        click.echo(
            "\t".join([s.name, state, timing_text(s), s.type, PRIORITY_NAMES.get(s.priority, "?"), *times])
        )


def _act(action: str, name: str) -> Any:
    try:
        return getattr(_schedules(), action)(name, "cli")
    except QueueError as exc:
        raise _refused(exc) from None


@schedules_cli.command("pause")
@click.argument("name")
def schedules_pause(name: str) -> None:
    """Stop firing the schedule (slots passed while paused never fire)."""
    _act("pause", name)
    click.echo(f"paused schedule {name}")


@schedules_cli.command("resume")
@click.argument("name")
def schedules_resume(name: str) -> None:
    """Fire the schedule again, from its next slot on."""
    schedule = _act("resume", name)
    click.echo(f"resumed schedule {name} (next {time_cell(schedule.next_fire_at)})")


@schedules_cli.command("run")
@click.argument("name")
def schedules_run(name: str) -> None:
    """Enqueue one job of the schedule now; its timing stays as it is."""
    job = _act("run_now", name)
    click.echo(f"enqueued job {job.id} of schedule {name}")


@schedules_cli.command("remove")
@click.argument("name")
def schedules_remove(name: str) -> None:
    """Delete the schedule; the jobs it made stay."""
    _act("delete", name)
    click.echo(f"removed schedule {name}")
