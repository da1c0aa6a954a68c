"""The pages: server-rendered, usable without JavaScript. They call the same queue layer as the API."""

from __future__ import annotations

from functools import wraps

from flask import abort, current_app
from flask_login import current_user, login_required

from queuelog.queue import Queue


def queue() -> Queue:
    return current_app.extensions["queuelog"]["queue"]


def db():
    return current_app.extensions["queuelog"]["db"]


def admin_required(view):
    """Logged-in admins only: anonymous visitors go to the login page, others get 403."""

    @wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not current_user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def register(app) -> None:
    from queuelog.web import admin, auth, jobs

    for module in (auth, jobs, admin):
        app.register_blueprint(module.bp)
