"""The admin console's pages (docs/console.md): workers, per-type figures, and what live refresh needs.

Live refresh is a static script (static/live.js) that fetches the page it is on again and swaps the
regions marked ``data-live``; these requests carry ``X-Queuelog-Live: 1``. They do not count as activity:
a tab left open with the poll on must not keep a login alive past QUEUELOG_SESSION_IDLE (docs/pages.md#live-pages), so their answers do not renew the session cookie.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from babel.dates import format_timedelta
from flask import Blueprint, Flask, abort, flash, redirect, render_template, request, url_for
from flask_babel import format_decimal, format_percent, format_time, get_locale
from flask_babel import gettext as _
from flask_login import current_user

from queuelog.access.auth import AuthError
from queuelog.models import utcnow
from queuelog.queue import monitor as console_stats
from queuelog.queue.monitor import ConsoleStats
from queuelog.web.context import admin_required, admin_store, queue
from queuelog.web.forms import ConfirmForm
from queuelog.web.jobs import _chart
from queuelog.web.sessions import ApiFreeSessions

bp = Blueprint("web_console", __name__, url_prefix="/admin")
LIVE_HEADER = "X-Queuelog-Live"


class LiveAwareSessions(ApiFreeSessions):
    """The app's sessions (none for the API), except that a live refresh's answer leaves the cookie as it
    is: an open tab does not keep a login alive past its idle limit."""

    def should_set_cookie(self, app: Flask, session) -> bool:  # type: ignore[override]
        if request.headers.get(LIVE_HEADER) == "1" and not session.modified:
            return False
        return super().should_set_cookie(app, session)


def install(app: Flask) -> None:
    """The session interface, and the template helpers of the console's pages and of the live bar."""
    app.session_interface = LiveAwareSessions()
    app.jinja_env.filters.update(clock_seconds=_clock_seconds, duration=_duration, percent=_percent)
    app.jinja_env.globals["live_now"] = utcnow  # a global: macros imported without context see it


def _clock_seconds(value: datetime) -> str:
    """ "14:02:31": a time of day with seconds, in the page's language and the person's zone."""
    return format_time(value, "medium")


def _duration(seconds: float | None) -> str:
    """A run time or wait: "340 ms", "2.5 s", "3 min", in the page's language."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return _("%(number)s ms", number=format_decimal(round(seconds * 1000)))
    if seconds < 100:
        return _("%(number)s s", number=format_decimal(round(seconds, 1)))
    # Babel's own function: Flask-Babel's wrapper takes no ``format`` (the short units, "2 min", "2分钟").
    return format_timedelta(
        timedelta(seconds=seconds), granularity="second", format="short", threshold=1.5, locale=get_locale()
    )


def _percent(value: float | None) -> str:
    """ "12.5%": a share, in the page's language; "—" when there is nothing to share out."""
    return "—" if value is None else format_percent(value, "#,##0.#%")


@bp.get("/workers")
@admin_required
def workers():
    """Every worker seen in the last day or holding a job: what it holds, did, and its key."""
    view = ConsoleStats(queue()).workers()
    return render_template("admin/workers.html", view=view)


@bp.route("/workers/<path:name>/revoke", methods=["GET", "POST"])  # "path": key names may hold "/"
@admin_required
def worker_revoke(name: str):
    """Revoke a worker's key after a confirmation that says how many jobs it holds (they run until their
    leases expire, then go back to the queue)."""
    if not admin_store().worker_key_in_use(name):
        abort(404)
    form = ConfirmForm()
    if request.method == "POST" and form.validate_on_submit():
        try:
            admin_store().revoke_key(name, actor=current_user.username)
        except AuthError:
            abort(404)
        flash(_("Key %(name)s revoked.", name=name), "success")
        return redirect(url_for("web_console.workers"))
    held = queue().engine.held_counts().get(name, 0)
    return render_template("admin/confirm_revoke.html", name=name, held=held, form=form)


@bp.get("/figures")
@admin_required
def figures():
    """Per job type: jobs by status, the last hour's and day's figures, and a chart per hour."""
    types = ConsoleStats(queue()).types()
    charts = {t.name: _chart(t.hourly) for t in types}
    return render_template("admin/figures.html", types=types, charts=charts, sample=console_stats.TYPE_SAMPLE)
