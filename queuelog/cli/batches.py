"""``flask --app app batches list|show|cancel``: batches of jobs (docs/batches.md) from the command line,
acting as an admin with the actor ``cli``. Automation relies on the output: keep it stable (tab-separated
rows, times in RFC 3339 UTC, ``-`` for nothing)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from flask import current_app
from flask.cli import AppGroup

from queuelog.cli.rows import text_cell, time_cell
from queuelog.models import BATCH_STATUSES, STATUSES
from queuelog.queue import JobNotFound, JobRecord, JobSearch, Queue, QueueError
from queuelog.queue.console import Console

if TYPE_CHECKING:
    from queuelog.engines.records import BatchRecord

batches_cli = AppGroup("batches", help="Batches of jobs: their progress, their jobs, cancelling them.")


def _queue() -> Queue:
    return current_app.extensions["queuelog"]["queue"]


def _finished(batch: BatchRecord) -> int:
    counts = batch.counts or {}
    return sum(counts.get(status, 0) for status in ("completed", "failed", "cancelled"))


def _row(batch: BatchRecord) -> str:
    """``id  status  finished/total  owner  created  finished  description``."""
    return "\t".join(
        [
            str(batch.id),
            batch.status,
            f"{_finished(batch)}/{batch.total}",
            batch.owner,
            time_cell(batch.created_at),
            time_cell(batch.finished_at),
            text_cell(batch.description) or "-",
        ]
    )


def _batch(batch_id: int) -> BatchRecord:
    try:
        return _queue().get_batch(batch_id)
    except JobNotFound:
        raise click.ClickException(f"no batch {batch_id}") from None


@batches_cli.command("list")
@click.option("--status", type=click.Choice(BATCH_STATUSES), help="Only batches in this status.")
@click.option("--owner", help="Only this user's batches.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
def batches_list(status: str | None, owner: str | None, limit: int) -> None:
    """Batches, newest first: id, status, finished/total, owner, created, finished, description."""
    for batch in _queue().list_batches(owner=owner, status=status, before_id=None, limit=limit):
        click.echo(_row(batch))


@batches_cli.command("show")
@click.argument("batch_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="The batch and its jobs as one JSON document.")
def batches_show(batch_id: int, as_json: bool) -> None:
    """A batch: its row as ``list`` prints it, its counts by status, then one line per job (id, type,
    status, the ids it waits for)."""
    batch = _batch(batch_id)
    members = _members(batch)
    counts = batch.counts or {}
    if as_json:
        document = {
            "id": batch.id,
            "status": batch.status,
            "description": batch.description,
            "owner": batch.owner,
            "total": batch.total,
            "counts": {status: counts.get(status, 0) for status in STATUSES},
            "on_success_job": batch.on_success_job,
            "on_finish_job": batch.on_finish_job,
            "created_at": time_cell(batch.created_at),
            "finished_at": None if batch.finished_at is None else time_cell(batch.finished_at),
            "jobs": [
                {"id": m.id, "type": m.type, "status": m.status, "depends_on": _ids(m.depends_on)}
                for m in members
            ],
        }
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(_row(batch))
    click.echo("counts\t" + "\t".join(f"{status} {counts.get(status, 0)}" for status in STATUSES))
    callbacks = (("on_success", batch.on_success_job), ("on_finish", batch.on_finish_job))
    for name, job_id in callbacks:
        if job_id is not None:
            click.echo(f"{name}\t{job_id}")
    for m in members:
        waits = ",".join(str(i) for i in _ids(m.depends_on)) or "-"
        click.echo(f"job\t{m.id}\t{m.type}\t{m.status}\t{waits}")


def _members(batch: BatchRecord) -> list[JobRecord]:
    """Every member of the batch, in the order they were enqueued (one search of their ids)."""
    if not batch.jobs:
        return []
    console = Console(_queue(), scan=len(batch.jobs))
    page = console.search(JobSearch(ids=tuple(batch.jobs)), before_id=None, limit=len(batch.jobs))
    return sorted(page.jobs, key=lambda job: job.id)


def _ids(text: str | None) -> list[int]:
    return list(json.loads(text)) if text else []


@batches_cli.command("cancel")
@click.argument("batch_id", type=int)
def batches_cancel(batch_id: int) -> None:
    """Cancel a running batch: its pending and waiting jobs end cancelled, its running jobs are asked to
    stop. Prints the batch's row afterwards."""
    _batch(batch_id)
    try:
        batch = _queue().cancel_batch(batch_id, "cli", owner=None)
    except JobNotFound:
        raise click.ClickException(f"no batch {batch_id}") from None
    except QueueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"cancelled batch {batch_id}")
    click.echo(_row(batch))
