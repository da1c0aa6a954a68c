"""``flask --app app types limit``: a job type's flow control from the command line (docs/flow-control.md).
Changes go through the queue layer, which checks them and audits them with the actor ``cli``. Automation
relies on the output: keep it stable."""

from __future__ import annotations

import re

import click
from flask import current_app
from flask.cli import AppGroup

from queuelog.inputs import ascii_int
from queuelog.queue import QueueError
from queuelog.queue.errors import each_refusal
from queuelog.queue.limits import MAX_CONCURRENCY, PERIOD_UNITS, rate_text

RATE = re.compile(r"^([0-9]{1,7})/([0-9]{0,5})([smhd])$")
UNIT_SECONDS = dict(PERIOD_UNITS)
RATE_HELP = "N/PERIOD: at most N claims per PERIOD, which is s, m, h or d, or a count of one (30s, 5m)"
types_cli = AppGroup("types", help="The allowlist of job types.")  # its other commands: cli/__init__.py

_OPTIONS = {"concurrency_limit": "--concurrency", "rate_limit": "--rate", "rate_period": "--rate period"}


def _none(text: str) -> bool:
    return text.strip().lower() == "none"


def parse_concurrency(text: str) -> int | None:
    """``none`` or a count of ASCII digits, spaces around either ignored (the queue layer checks its
    range)."""
    if _none(text):
        return None
    count = ascii_int(text.strip(), max_digits=9)
    if count is not None:
        return count
    raise click.ClickException(f"--concurrency: give a whole number from 1 to {MAX_CONCURRENCY}, or none")


def parse_rate(text: str) -> tuple[int | None, int | None]:
    """``none``, or ``N/PERIOD`` (``100/m``, ``10/30s``): the rate limit and its period in seconds."""
    if _none(text):
        return None, None
    match = RATE.match(text.strip())
    if match is None:
        raise click.ClickException(f"--rate: {text!r} is not {RATE_HELP}, nor none")
    count, times, unit = match.groups()
    return int(count), int(times or 1) * UNIT_SECONDS[unit]


def _wording(refusal: QueueError) -> str:
    """A refusal as the JSON API words it, naming the option rather than the field."""
    from queuelog.api.refusals import TABLE

    message = TABLE[refusal.code].words(refusal.params)
    return f"{_OPTIONS.get(refusal.field or '', refusal.field)}: {message}" if refusal.field else message


@types_cli.command("limit")
@click.argument("name")
@click.option("--concurrency", metavar="N|none", help="At most N jobs of the type running at once.")
@click.option("--rate", metavar="N/PERIOD|none", help=f"{RATE_HELP}; e.g. 100/m, 10/30s.")
def types_limit(name: str, concurrency: str | None, rate: str | None) -> None:
    """Set or remove (none) a job type's concurrency limit and rate limit."""
    if concurrency is None and rate is None:
        raise click.ClickException("give --concurrency, --rate or both")
    limits: dict[str, int | None] = {}
    if concurrency is not None:
        limits["concurrency_limit"] = parse_concurrency(concurrency)
    if rate is not None:
        limits["rate_limit"], limits["rate_period"] = parse_rate(rate)
    types = current_app.extensions["queuelog"]["queue"].types
    try:
        job_type = types.set_limits(name, "cli", **limits)
    except LookupError:
        raise click.ClickException(f"no type {name!r}") from None
    except QueueError as exc:
        raise click.ClickException("; ".join(_wording(r) for r in each_refusal(exc))) from None
    click.echo(f"limited type {name}: {limits_text(job_type)}")


def limits_text(job_type) -> str:
    concurrency = "-" if job_type.concurrency_limit is None else job_type.concurrency_limit
    return f"concurrency {concurrency}, rate {rate_text(job_type)}"
