"""What every page module needs of the request's app and user: the logged-in principal, the app's queue,
console, database and admin store, and the guard of the admins' pages. A module of its own, so that the
page modules import it and not their package (whose ``register`` imports them).
"""

from __future__ import annotations

from functools import wraps

from flask import abort, current_app
from flask_login import current_user, login_required

from queuelog.queue import Queue
from queuelog.queue.admin import AdminStore
from queuelog.queue.console import Console
from queuelog.queue.principal import Principal


def principal() -> Principal:
    """The logged-in person as a ``Principal``: what they may see and do (queuelog/queue/principal.py)."""
    return Principal.of_user(current_user)


def queue() -> Queue:
    return current_app.extensions["queuelog"]["queue"]


def console() -> Console:
    """The console's search and bulk actions, with the configured window and step (docs/configuration.md#settings)."""
    config = current_app.config["QUEUELOG"]
    return Console(queue(), scan=config["SEARCH_SCAN"], budget=config["BULK_STEP_SECONDS"])


def db():
    return current_app.extensions["queuelog"]["db"]


def admin_store() -> AdminStore:
    """Users, API keys and the audit log (queuelog/queue/admin.py)."""
    return current_app.extensions["queuelog"]["admin"]


def admin_required(view):
    """Logged-in admins only: anonymous visitors go to the login page, others get 403."""

    @wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not principal().is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped
