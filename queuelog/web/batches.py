"""The batches' pages (docs/batches.md): the list, and a batch's page with its progress, its counts, its
jobs and their dependency graph, drawn on the server (queuelog/web/graph.py). Producers see their own
batches, admins every one; the owner or an admin may cancel a running batch, an admin retry one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_login import login_required

from queuelog.inputs import ascii_int
from queuelog.models import BATCH_STATUSES, STATUSES
from queuelog.queue import JobNotFound, JobRecord, JobSearch, QueueError
from queuelog.web.context import console, principal, queue
from queuelog.web.forms import ConfirmForm
from queuelog.web.graph import Node, draw
from queuelog.web.refusals import refusal_text

if TYPE_CHECKING:
    from queuelog.engines.records import BatchRecord

bp = Blueprint("web_batches", __name__)
PAGE_SIZE = 50
BATCH_PAGE_REFRESH_SECONDS = 5  # how often the page of a running batch reloads itself
MEMBERS_SHOWN = 500  # rows of the jobs table on a batch's page; the jobs list has them all
GRAPH_NODES = 2000  # jobs in the drawing, beyond which it shows the first ones only
# The batch statuses' names on the pages.
BATCH_STATUS_NAMES = {
    "running": _l("running"),
    "succeeded": _l("succeeded"),
    "finished_with_failures": _l("finished with failures"),
}
FINISHED_STATUSES = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class BatchView:
    """A batch as its pages show it: the stored batch with its progress worked out."""

    id: int
    owner: str
    description: str
    status: str
    total: int
    counts: dict[str, int]
    on_success_job: int | None
    on_finish_job: int | None
    has_on_success: bool
    has_on_finish: bool
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, batch: BatchRecord) -> BatchView:
        counts = dict(batch.counts or {})
        return cls(
            id=batch.id,
            owner=batch.owner,
            description=batch.description,
            status=batch.status,
            total=batch.total,
            counts=counts,
            on_success_job=batch.on_success_job,
            on_finish_job=batch.on_finish_job,
            has_on_success=batch.on_success is not None,
            has_on_finish=batch.on_finish is not None,
            created_at=batch.created_at,
            finished_at=batch.finished_at,
        )

    @property
    def done(self) -> int:
        """Members finished, however they ended: completed, failed or cancelled."""
        return sum(self.counts.get(status, 0) for status in FINISHED_STATUSES)

    @property
    def percent(self) -> int:
        """Finished members in whole percent, rounded down (100 only once all are finished)."""
        return 100 * self.done // self.total if self.total else 100


def visible_batch(batch_id: int) -> BatchRecord:
    """The batch if the person may see it (its owner, or an admin), else 404."""
    try:
        return queue().get_batch(batch_id, owner=principal().owner_scope)
    except JobNotFound:
        abort(404)


def _names() -> dict[str, Any]:
    """The statuses' names, translated once per page rather than once per row."""
    return {
        "status_names": {status: _(status) for status in STATUSES},
        "batch_status_names": {status: str(name) for status, name in BATCH_STATUS_NAMES.items()},
        "statuses": STATUSES,
    }


@bp.get("/queue/batches")
@login_required
def batch_list():
    """Batches newest first, by status and (for admins) owner."""
    who = principal()
    query = {name: request.args.get(name, "").strip() for name in ("status", "owner")}
    query = {k: v for k, v in query.items() if v and (who.is_admin or k != "owner")}
    errors: dict[str, str] = {}
    if query.get("status") and query["status"] not in BATCH_STATUSES:
        errors["status"] = _("Choose a status from the list.")
    if len(query.get("owner", "")) > 64:
        errors["owner"] = _("Use at most %(max)d characters.", max=64)
    before = ascii_int(request.args.get("before"))
    batches: list[BatchView] = []
    next_before = None
    if not errors:
        owner = who.owner_scope if who.owner_scope is not None else query.get("owner")
        found = queue().list_batches(
            owner=owner, status=query.get("status"), before_id=before, limit=PAGE_SIZE + 1
        )
        batches = [BatchView.of(b) for b in found[:PAGE_SIZE]]
        next_before = batches[-1].id if len(found) > PAGE_SIZE else None
    names = _names()
    names["statuses"] = BATCH_STATUSES
    return render_template(
        "batches/list.html",
        batches=batches,
        errors=errors,
        query=query,
        next_before=next_before,
        first_page=before is None,
        **names,
    ), (422 if errors else 200)


@bp.get("/queue/batches/<jobid:batch_id>")
@login_required
def batch_page(batch_id: int):
    """The batch: progress, counts, its jobs and the drawing of their dependencies."""
    record = visible_batch(batch_id)
    batch = BatchView.of(record)
    members = batch_members(record, max(GRAPH_NODES, MEMBERS_SHOWN))
    depends = {m.id: _ids(m.depends_on) for m in members}
    nodes = [Node(m.id, m.status, m.type, depends[m.id]) for m in members[:GRAPH_NODES]]
    names = _names()
    job_path = url_for("web_jobs.job_page", job_id=1)[:-1]  # a job's page is job_path + its id
    graph = draw(
        nodes,
        job_path,
        names["status_names"],
        _("The dependencies of batch #%(id)s", id=batch.id),
    )
    who = principal()
    rows = [
        {"id": m.id, "type": m.type, "status": m.status, "depends_on": depends[m.id]}
        for m in members[:MEMBERS_SHOWN]
    ]
    failures = batch.counts.get("failed", 0) + batch.counts.get("cancelled", 0)
    return render_template(
        "batches/detail.html",
        batch=batch,
        members=rows,
        job_path=job_path,
        members_cut=len(record.jobs) > MEMBERS_SHOWN,
        graph=graph,
        graph_cut=GRAPH_NODES if len(record.jobs) > GRAPH_NODES else 0,
        may_cancel=batch.status == "running",
        may_retry=who.is_admin and failures > 0,
        refresh_seconds=BATCH_PAGE_REFRESH_SECONDS,
        **names,
    )


def batch_members(batch: BatchRecord, limit: int) -> list[JobRecord]:
    """The batch's first ``limit`` members in the order they were enqueued: one search of their ids (the
    primary key's index)."""
    ids = tuple(batch.jobs[:limit])
    if not ids:
        return []
    page = console().search(JobSearch(ids=ids), before_id=None, limit=len(ids))
    return sorted(page.jobs, key=lambda job: job.id)


def _ids(text: str | None) -> tuple[int, ...]:
    """A job's ``depends_on`` as stored (a JSON array of ids as text, or None)."""
    return tuple(json.loads(text)) if text else ()


@bp.post("/queue/batches/<jobid:batch_id>/cancel")
@login_required
def cancel(batch_id: int):
    """Cancel the batch's pending and waiting jobs; ask the workers of its running ones to stop them."""
    visible_batch(batch_id)
    if ConfirmForm().validate_on_submit():
        who = principal()
        try:
            queue().cancel_batch(batch_id, who.name, owner=who.owner_scope)
            flash(
                _("Batch %(id)s cancelled: its running jobs stop at their next check.", id=batch_id),
                "success",
            )
        except JobNotFound:
            abort(404)
        except QueueError as exc:
            flash(refusal_text(exc), "error")
    return redirect(url_for("web_batches.batch_page", batch_id=batch_id))


@bp.post("/queue/batches/<jobid:batch_id>/retry")
@login_required
def retry(batch_id: int):
    """Admins: the batch's failed and cancelled jobs go back to the queue."""
    if not principal().is_admin:
        abort(403)
    visible_batch(batch_id)
    if ConfirmForm().validate_on_submit():
        try:
            queue().retry_batch(batch_id, principal().name)
            flash(
                _("The failed and cancelled jobs of batch %(id)s are queued again.", id=batch_id), "success"
            )
        except JobNotFound:
            abort(404)
        except QueueError as exc:
            flash(refusal_text(exc), "error")
    return redirect(url_for("web_batches.batch_page", batch_id=batch_id))
