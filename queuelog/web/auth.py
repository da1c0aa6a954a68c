"""Logging in and out, sessions and their end, one's password, the person's language and time zone."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_login import current_user, login_required, login_user, logout_user

from queuelog.access.auth import AuthError
from queuelog.access.ratelimit import LoginLimiter
from queuelog.extensions import login_manager
from queuelog.i18n import LANGUAGES, timezone_choices, valid_timezone
from queuelog.models import User
from queuelog.web.context import admin_store
from queuelog.web.forms import LoginForm, PasswordChangeForm
from queuelog.web.refusals import refusal_text

bp = Blueprint("web_auth", __name__)
LOGIN_AT = "login_at"  # in the session: when the person logged in (seconds since the epoch)


@login_manager.user_loader
def load_user(session_id: str) -> User | None:
    """The user behind the session id ``<user id>:<session version>`` stamped at login.

    None (the visitor is logged out) when the user's session version has moved on since (logout, a new
    password, deactivation or a new role end every session), when the user is deactivated, or when the login
    is older than QUEUELOG_SESSION_LIFETIME. Idle sessions end by themselves: the cookie's signature is
    older than QUEUELOG_SESSION_IDLE (Flask's PERMANENT_SESSION_LIFETIME, renewed with every response)."""
    user_id, _sep, version = session_id.partition(":")
    logged_in_at = session.get(LOGIN_AT)
    if not (user_id.isdigit() and version.isdigit() and isinstance(logged_in_at, int)):
        return None
    lifetime = current_app.config["QUEUELOG"]["SESSION_LIFETIME"]
    if time.time() - logged_in_at > lifetime.total_seconds():
        return None
    user = admin_store().user(int(user_id))
    if user is None or not user.active or user.session_version != int(version):
        return None
    return user


def start_session(user: User, *, logged_in_at: int | None = None) -> None:
    """Stamp the session with the user's current session version (a login, or a password change)."""
    session.permanent = True
    session[LOGIN_AT] = int(time.time()) if logged_in_at is None else logged_in_at
    login_user(user)


def login_limiter() -> LoginLimiter:
    return current_app.extensions["queuelog"]["login_limiter"]


def too_many_attempts() -> str:
    minutes = int(login_limiter().window.total_seconds() // 60)
    return _("Too many failed logins. Try again in %(minutes)d minutes.", minutes=minutes)


def safe_next(target: str | None) -> str:
    """Only local paths: no scheme, no host, no protocol-relative or backslash tricks."""
    if not target:
        return url_for("web_jobs.dashboard")
    parts = urlsplit(target)
    if (
        parts.scheme
        or parts.netloc
        or not target.startswith("/")
        or target.startswith(("//", "/\\"))
        or "\\" in target
    ):
        return url_for("web_jobs.dashboard")
    return target


@bp.route("/login", methods=["GET", "POST"])
def login():
    form = LoginForm()
    if current_user.is_authenticated and request.method == "GET":
        return redirect(safe_next(request.args.get("next")))
    if form.validate_on_submit():
        limiter = login_limiter()
        username = form.username.data.strip()
        reservation = limiter.reserve(username, request.remote_addr or "unknown")
        if reservation is None:  # refused before any password is checked
            return render_template("auth/login.html", form=form, error=too_many_attempts()), 429
        user = admin_store().login(username, form.password.data)  # as slow for unknown names
        if user is not None:
            limiter.succeeded(reservation)
            preferences = {k: session[k] for k in ("locale", "timezone") if k in session}
            session.clear()  # a fresh session at login: nothing from before survives (session fixation)
            session.update(preferences)
            start_session(user)
            return redirect(safe_next(request.args.get("next")))
        # The reservation stays: it is this failure's record.
        return render_template("auth/login.html", form=form, error=_("Unknown user or wrong password.")), 200
    return render_template("auth/login.html", form=form, error=None)


@bp.post("/logout")
def logout():
    """Log out, and end the person's sessions everywhere: a copy of the cookie is worth nothing after."""
    kept = {k: session[k] for k in ("locale", "timezone") if k in session}  # no credentials, these
    if current_user.is_authenticated:
        admin_store().end_sessions(current_user.id)
        # The profile's choices, so that the login page after this speaks the person's language.
        profile = {"locale": current_user.locale, "timezone": current_user.timezone}
        kept.update({k: v for k, v in profile.items() if v})
    logout_user()
    session.clear()
    session.update(kept)
    flash(_("You are logged out."), "info")
    return redirect(url_for("web_auth.login"))


@bp.post("/language")
def set_language():
    """The language menu: kept in the profile for logged-in people, in the session for visitors."""
    locale = request.form.get("locale", "")
    if locale in LANGUAGES:
        session["locale"] = locale
        if current_user.is_authenticated:
            admin_store().set_preferences(current_user.id, locale=locale)
    return redirect(safe_next(request.form.get("next")))


@bp.get("/settings")
def settings():
    """Language and time zone, for visitors and logged-in people alike; one's password, once logged in."""
    return _settings_page(PasswordChangeForm())


def _settings_page(password_form: PasswordChangeForm) -> str:
    from flask_babel import get_timezone

    return render_template(
        "auth/settings.html",
        zones=timezone_choices(),
        current_zone=str(get_timezone()),
        password_form=password_form,
    )


@bp.post("/settings/password")
@login_required
def change_password():
    """Change one's own password: every other session of the person ends, this one stays logged in.

    Wrong current passwords count as failed logins (the same limits), so a borrowed session cannot be
    used to guess the password."""
    form = PasswordChangeForm()
    if not form.validate_on_submit():
        return _settings_page(form), 422
    limiter = login_limiter()
    reservation = limiter.reserve(current_user.username, request.remote_addr or "unknown")
    if reservation is None:
        form.current_password.errors.append(too_many_attempts())
        return _settings_page(form), 429
    if not current_user.check_password(form.current_password.data):
        form.current_password.errors.append(_("That is not your current password."))
        return _settings_page(form), 422
    limiter.succeeded(reservation)
    try:
        user = admin_store().update_user(
            current_user.username, actor=current_user.username, password=form.new_password.data
        )
    except AuthError as exc:
        form.new_password.errors.append(refusal_text(exc))
        return _settings_page(form), 422
    start_session(user, logged_in_at=session.get(LOGIN_AT))  # this session, at the new version
    flash(_("Your password is changed. Your other sessions have ended."), "success")
    return redirect(url_for("web_auth.settings"))


@bp.post("/timezone")
def set_timezone():
    """The time zone times are shown in: from the settings menu, or reported by the browser."""
    zone = request.form.get("timezone", "")
    if valid_timezone(zone):
        session["timezone"] = zone
        if current_user.is_authenticated:
            admin_store().set_preferences(current_user.id, timezone=zone)
    if request.form.get("reply") == "none":  # the page's script reporting the browser's zone
        return "", 204
    return redirect(safe_next(request.form.get("next")))
