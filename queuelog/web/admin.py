"""Admin pages: errors (grouped, with bulk retry and cancel), users, API keys, the audit log; the job types'
pages are in types.py, on this blueprint."""

from __future__ import annotations

import re

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from wtforms import SelectChoice

from queuelog.access.auth import AuthError
from queuelog.queue import BulkAudit
from queuelog.queue.stats import QueueStats
from queuelog.web.bulk import done_message
from queuelog.web.context import admin_required, admin_store, console, queue
from queuelog.web.forms import (
    ConfirmForm,
    KeyCreateForm,
    PasswordResetForm,
    UserCreateForm,
    UserRoleForm,
)
from queuelog.web.refusals import KEY_USER_REFUSALS, PASSWORD_REFUSALS, refusal_text

bp = Blueprint("web_admin", __name__, url_prefix="/admin")


# -- errors -------------------------------------------------------------------------------------------


@bp.get("/errors")
@admin_required
def errors():
    groups = QueueStats(queue()).error_groups()
    return render_template("admin/errors.html", groups=groups)


@bp.route("/errors/<group_id>/<action>", methods=["GET", "POST"])
@admin_required
def error_group_action(group_id: str, action: str):
    """Retry a group's failed jobs, or cancel its pending ones, after a confirmation showing how many."""
    if action not in ("retry", "cancel") or not re.fullmatch(r"[0-9a-f]{16}", group_id):
        abort(404)
    group = QueueStats(queue()).error_group(group_id)
    if group is None:
        abort(404)
    job_ids = group.failed_jobs if action == "retry" else group.pending_jobs
    form = ConfirmForm()
    if request.method == "POST" and form.validate_on_submit():
        # The same bulk action as the jobs list's (queuelog/queue/console.py): batches, each guarded by
        # status in its statement, so a job that changed since the confirmation is left alone.
        audit = BulkAudit(f"error group {group_id}", f"{group.type}: {group.signature}")
        done = console().apply(action, job_ids, current_user.username, audit=audit)
        message = done_message(action, done)
        flash(message, "success")
        return redirect(url_for("web_admin.errors"))
    return render_template("admin/confirm_group.html", group=group, action=action, job_ids=job_ids, form=form)


# -- users --------------------------------------------------------------------------------------------


@bp.route("/users", methods=["GET", "POST"])
@admin_required
def users():
    form = UserCreateForm()
    if form.validate_on_submit():
        try:
            admin_store().create_user(
                form.username.data.strip(),
                form.role.data,
                form.password.data,
                actor=current_user.username,
            )
            flash(_("User %(name)s created.", name=form.username.data.strip()), "success")
            return redirect(url_for("web_admin.users"))
        except AuthError as exc:
            field = form.password if exc.code in PASSWORD_REFUSALS else form.username
            field.errors.append(refusal_text(exc))
    return render_template(
        "admin/users.html",
        form=form,
        users=admin_store().users(),
        role_form=UserRoleForm(),
        password_form=PasswordResetForm(),
        confirm=ConfirmForm(),
    ), (422 if form.errors else 200)


@bp.post("/users/<path:username>/<change>")
@admin_required
def user_change(username: str, change: str):
    """Change a user's role, active flag or password: each of these ends the user's sessions."""
    changes: dict = {}
    if change == "role":
        form = UserRoleForm()
        if form.validate_on_submit():
            changes["role"] = form.role.data
    elif change in ("deactivate", "activate"):
        if ConfirmForm().validate_on_submit():
            changes["active"] = change == "activate"
    elif change == "password":
        form = PasswordResetForm()
        if form.validate_on_submit():
            changes["password"] = form.password.data
        else:
            for error in form.password.errors[:1]:
                flash(error, "error")
    else:
        abort(404)
    if changes:
        try:
            admin_store().update_user(username, actor=current_user.username, **changes)
            flash(_("User %(name)s updated.", name=username), "success")
        except AuthError as exc:
            flash(refusal_text(exc), "error")
    return redirect(url_for("web_admin.users"))


# -- API keys -----------------------------------------------------------------------------------------


@bp.route("/keys", methods=["GET", "POST"])
@admin_required
def keys():
    form = KeyCreateForm()
    store = admin_store()
    people = store.users(active_only=True)
    key_rows = store.keys(newest_first=True)
    form.user.choices = [SelectChoice("", "—")] + [SelectChoice(u.username, u.username) for u in people]
    new_key = None
    if form.validate_on_submit():
        try:
            new_key = store.create_key(
                form.name.data.strip(),
                form.kind.data,
                username=form.user.data or None,
                actor=current_user.username,
            )
        except AuthError as exc:
            field = form.user if exc.code in KEY_USER_REFUSALS else form.name
            field.errors.append(refusal_text(exc))
        else:
            # Shown in this response only (never put in a flash message: those travel in the cookie).
            return render_template("admin/key_created.html", key=new_key, name=form.name.data.strip())
    return render_template("admin/keys.html", form=form, keys=key_rows, confirm=ConfirmForm()), (
        422 if form.errors else 200
    )


@bp.post("/keys/<path:name>/revoke")  # "path": key and user names may hold "/"
@admin_required
def key_revoke(name: str):
    if ConfirmForm().validate_on_submit():
        try:
            admin_store().revoke_key(name, actor=current_user.username)
            flash(_("Key %(name)s revoked.", name=name), "success")
        except AuthError:
            abort(404)
    return redirect(url_for("web_admin.keys"))


# -- audit log ----------------------------------------------------------------------------------------


@bp.get("/audit")
@admin_required
def audit_log():
    return render_template("admin/audit.html", rows=admin_store().audit_log())
