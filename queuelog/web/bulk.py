"""Bulk actions on jobs (admins): on the rows chosen in the jobs list, or on everything matching its
search. Each asks first, on a page that says how many jobs it will touch, and is recorded in the audit
log with the search and the count; each job's history records its retry or cancellation.

An action on a search is carried out in bounded steps (queuelog/queue/console.py): one request works for
about two seconds, then answers with the count so far and a button to go on, which carries the place it
stopped and the newest id counted at the confirmation (docs/console.md#bulk-actions-admins)."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from queuelog.inputs import ascii_int
from queuelog.queue import BulkAudit
from queuelog.queue.console import ACTIONS, COUNT_CAP
from queuelog.web.context import admin_required, console
from queuelog.web.forms import ConfirmForm
from queuelog.web.search import parse_search, search_terms

bp = Blueprint("web_bulk", __name__, url_prefix="/queue/bulk")
MAX_SELECTED = 500  # ids one request may name (the list shows 50 a page)


def done_message(action: str, done: int) -> str:
    """What a finished bulk action did, in the page's language."""
    if action == "retry":
        return ngettext("%(num)d job retried.", "%(num)d jobs retried.", done)
    if action == "cancel":
        return ngettext("%(num)d job cancelled.", "%(num)d jobs cancelled.", done)
    return ngettext("%(num)d job deleted.", "%(num)d jobs deleted.", done)


def _action(action: str) -> str:
    if action not in ACTIONS:
        abort(404)
    return action


@bp.post("/selected")
@admin_required
def selected():
    """The rows ticked in the jobs list: a confirmation first, then the action."""
    action = _action(request.form.get("action", ""))
    job_ids = sorted({i for i in map(ascii_int, request.form.getlist("ids")) if i is not None})
    back = request.form.get("back", "")
    back_url = url_for("web_jobs.job_list") + (f"?{back}" if back.isprintable() else "")
    if not job_ids or len(job_ids) > MAX_SELECTED:
        flash(_("Select at least one job, and at most %(max)d.", max=MAX_SELECTED), "error")
        return redirect(back_url)
    form = ConfirmForm()
    if request.form.get("confirmed") == "1" and form.validate_on_submit():
        audit = BulkAudit("selected", "ids: " + " ".join(map(str, job_ids)))
        done = console().apply(action, job_ids, current_user.username, audit=audit)
        flash(done_message(action, done), "success")
        return redirect(back_url)
    return render_template(
        "jobs/bulk_confirm.html", action=action, count=len(job_ids), job_ids=job_ids, back=back, form=form
    )


@bp.route("/<action>", methods=["GET", "POST"])
@admin_required
def matching(action: str):
    """Everything matching the jobs list's search: GET confirms with the count, POST carries it out."""
    action = _action(action)
    values = request.args if request.method == "GET" else request.form
    parsed = parse_search(values, admin=True, username=current_user.username)
    if parsed.errors:
        return redirect(url_for("web_jobs.job_list", **parsed.query))
    bulk = console()
    back = urlencode(parsed.query)
    form = ConfirmForm()
    if request.method == "GET":
        ceiling = bulk.newest_id()
        count = bulk.count(parsed.search, action, ceiling=ceiling)
        return render_template(
            "jobs/bulk_confirm.html",
            action=action,
            count=min(count, COUNT_CAP),
            capped=count > COUNT_CAP,
            query=parsed.query,
            terms=search_terms(parsed),
            ceiling=ceiling,
            back=back,
            form=form,
        )
    ceiling = ascii_int(request.form.get("ceiling"))
    if ceiling is None or not form.validate_on_submit():
        abort(400)
    before = ascii_int(request.form.get("before")) or ceiling + 1
    total = ascii_int(request.form.get("total")) or 0
    audit = BulkAudit("matching", f"search: {back or '(everything)'}; ids below {before}")
    progress = bulk.apply_matching(action, parsed.search, current_user.username, below=before, audit=audit)
    total += progress.done
    if progress.next_before is None:
        flash(done_message(action, total), "success")
        return redirect(url_for("web_jobs.job_list", **parsed.query))
    return render_template(
        "jobs/bulk_progress.html",
        action=action,
        done_message=done_message,
        total=total,
        query=parsed.query,
        ceiling=ceiling,
        before=progress.next_before,
        back=back,
        form=form,
    )
