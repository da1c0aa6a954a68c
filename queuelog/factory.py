"""The app factory: configuration, database, queue layer, blueprints, error handlers, commands."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

import click
from flask import Flask, current_app, g, render_template, request
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix

from queuelog.access.ratelimit import LoginLimiter
from queuelog.config import SettingError, load_settings, warn_unknown_variables
from queuelog.db import Database, DatabaseUnavailable, DatabaseUnusable, RevisionRefused
from queuelog.drivers import as_unavailable
from queuelog.paths import STATIC, TEMPLATES, TRANSLATIONS, instance_path
from queuelog.queue import Queue
from queuelog.queue.admin import first_start
from queuelog.web.sessions import ApiFreeSessions, is_api_path

log = logging.getLogger("queuelog")


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app: configuration, database, queue layer, blueprints, error handlers, commands."""
    app = Flask(
        __name__,
        instance_path=instance_path(),
        instance_relative_config=True,
        template_folder=str(TEMPLATES),
        static_folder=str(STATIC),
    )
    # A doubled slash is a 404 like any unknown path, not a redirect to the merged one (which for
    # /jobs//complete would be another operation, answered in HTML).
    app.url_map.merge_slashes = False
    try:
        config = load_settings(app.instance_path, (test_config or {}).get("QUEUELOG"))
    except SettingError as exc:
        raise SystemExit(f"queuelog: {exc}") from None  # one line, exit status 1 (docs/configuration.md)
    warn_unknown_variables(app.logger.warning)
    app.config["QUEUELOG"] = config  # a frozen Settings; read it as config.lease_seconds in new code
    app.config.update(
        SECRET_KEY=config["SECRET_KEY"],
        MAX_CONTENT_LENGTH=config["MAX_REQUEST_BYTES"],
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=config["SESSION_COOKIE_SECURE"],
        PERMANENT_SESSION_LIFETIME=config["SESSION_IDLE"],  # logins are permanent: their idle limit
    )
    if test_config:
        app.config.update({k: v for k, v in test_config.items() if k != "QUEUELOG"})

    app.session_interface = ApiFreeSessions()  # the pages' live refresh refines it (web/monitor.py)
    register_extensions(app)
    register_blueprints(app)
    register_errorhandlers(app)
    register_commands(app)
    app.before_request(_schema_gate)
    app.after_request(_security_headers)
    if config["TRUSTED_PROXIES"] > 0:  # the client address: from X-Forwarded-For, as our proxies wrote it
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=config["TRUSTED_PROXIES"])
    return app


def register_extensions(app: Flask) -> None:
    config = app.config["QUEUELOG"]
    try:
        db = Database(
            config["DATABASE_URL"],
            pool_size=config["DB_POOL_SIZE"],
            max_overflow=config["DB_MAX_OVERFLOW"],
            busy_timeout_ms=config["SQLITE_BUSY_TIMEOUT_MS"],
            password_hash=config["PASSWORD_HASH"],
            connect_timeout=config.db_connect_timeout,
            statement_timeout=config.db_statement_timeout,
            prepared_statements=config.db_prepared_statements,
        )
    except DatabaseUnusable as exc:
        raise SystemExit(f"queuelog: {exc}") from None  # one line, exit status 1
    queue = Queue(
        db,
        lease_seconds=config["LEASE_SECONDS"],
        backoff_base=config["RETRY_BACKOFF_BASE"],
        backoff_max=config["RETRY_BACKOFF_MAX"],
        poll_interval=config["LONG_POLL_INTERVAL"],
        max_snoozes=config["MAX_SNOOZES"],
        wakeups=config["WAKEUPS"],
        safety_net=config["WAKEUP_SAFETY_NET"],
        max_waiting=config["MAX_WAITING_POLLS"],
    )
    from queuelog.queue.admin import AdminStore
    from queuelog.queue.schedules import Schedules, recheck_for

    app.extensions["queuelog"] = {
        "db": db,
        "queue": queue,
        "schedules": Schedules(queue, recheck_seconds=recheck_for(config["SCHEDULE_TICK"])),
        # Users, keys and the audit log; the API's key check of every request goes through this one.
        "admin": AdminStore(db, engine=queue.engine, wakeups=queue.wakeups),
        "login_limiter": LoginLimiter(db),
        "schema": SchemaWatch(db),
    }

    from queuelog.extensions import babel, csrf, login_manager
    from queuelog.i18n import select_locale, select_timezone

    babel.init_app(
        app,
        locale_selector=select_locale,
        timezone_selector=select_timezone,
        default_translation_directories=str(TRANSLATIONS),
    )
    hooks = _request_hooks(app)
    csrf.init_app(app)  # a before_request hook: the CSRF check of forms
    login_manager.init_app(app)  # an after_request hook: the remember-me cookie
    _for_pages_only(app, hooks)
    try:
        prepare_database(app, db)
    except (OperationalError, DatabaseUnavailable) as exc:
        reason = str(getattr(exc, "orig", exc)).splitlines()[0]
        if db.dialect == "sqlite" and "locked" not in reason:  # a file we cannot open will not heal
            raise SystemExit(f"queuelog: cannot use the database {db.url.database}: {reason}") from None
        # A database server may come up after the app, another process may hold SQLite's write lock for
        # long: serve, and let /healthz say 503 while the database cannot be reached.
        app.logger.warning("the database was not ready at start-up (%s); serving anyway", reason)
    if (config["RETENTION"] or config["SCHEDULE_TICK"] > 0) and not app.testing and _serving():
        from queuelog.maintenance import start_maintenance

        start_maintenance(
            app,
            queue,
            config.retention,
            config["PRUNE_INTERVAL"],
            schedules=app.extensions["queuelog"]["schedules"] if config["SCHEDULE_TICK"] > 0 else None,
            tick=config["SCHEDULE_TICK"],
        )


def _request_hooks(app: Flask) -> tuple[list[Any], list[Any]]:
    """The app-wide before and after request hooks registered so far (copies)."""
    return list(app.before_request_funcs.get(None, ())), list(app.after_request_funcs.get(None, ()))


def _for_pages_only(app: Flask, before: tuple[list[Any], list[Any]]) -> None:
    """Make the app-wide request hooks registered since ``before`` (the extensions' hooks for the pages:
    Flask-WTF's CSRF check, Flask-Login's remember-me cookie) skip the JSON API's requests, which carry no
    session and no form (docs/api.md#authentication-and-errors): less work on the API's every request, and
    no hook that writes to the session an API request does not have (Flask-Login's
    ``REMEMBER_COOKIE_REFRESH_EACH_REQUEST`` did, and failed every API call)."""
    for funcs, known in zip((app.before_request_funcs, app.after_request_funcs), before, strict=True):
        hooks = funcs.get(None, [])
        hooks[:] = [hook if hook in known else _pages_only(hook) for hook in hooks]


def _pages_only(hook: Any) -> Any:
    """``hook``, run for the pages' requests; an API request passes it by (an after_request hook hands the
    response on unchanged)."""

    @functools.wraps(hook)
    def for_pages(*response: Any) -> Any:
        if is_api_path(current_app, request.path):
            return response[0] if response else None
        return hook(*response)

    return for_pages


def _invoked() -> str | None:
    """The `flask` command this process runs, or None under a WSGI server. Flask's own commands (``run``,
    ``shell``, ``routes``) create the app while they run, and are named; the app's commands (``db``,
    ``users`` ...) are found on the app, so it is created before click knows which one runs: "" then."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.find_root().invoked_subcommand or ""


def _serving() -> bool:
    """Whether this process is one that serves: gunicorn or any WSGI server, or `flask run`. The other
    `flask` commands (`db upgrade`, `types add`, `shell` ...) create the app to reach its database and
    leave again: they start no maintenance thread (docs/concepts.md#retention)."""
    return _invoked() in (None, "run")


def prepare_database(app: Flask, db: Database) -> None:
    """Bring a database that upgrades itself (SQLite by default) to the current schema, then make sure
    the allowlist and the first admin exist. Reads first: a started database takes no write lock here."""
    auto_upgrade = app.config["QUEUELOG"]["AUTO_UPGRADE"]
    if auto_upgrade is None:
        auto_upgrade = db.dialect == "sqlite"
    current = db.is_current()
    if auto_upgrade and not current:
        try:
            db.upgrade()
        except RevisionRefused as exc:
            raise SystemExit(f"queuelog: {exc}") from None  # one line, exit status 1
        current = True
    if current:
        bootstrap(app)
        return
    app.extensions["queuelog"]["schema"].behind = True
    if _serving():  # not for `db upgrade`, the cure, nor the other commands
        app.logger.warning("%s; until then every request answers 503", SCHEMA_BEHIND)


UPGRADE_COMMAND = "flask --app queuelog:create_app db upgrade"  # from a checkout and from a wheel alike
SCHEMA_BEHIND = f"the database schema is not up to date: run `{UPGRADE_COMMAND}`"


class SchemaWatch:
    """Whether the database's schema is behind this code's migrations (PostgreSQL is never upgraded behind
    the operator's back). While it is, every request but a static file answers 503 saying what to run,
    instead of failing on tables that are not there; the schema is read again at most once a second, so
    that the app serves as soon as `db upgrade` (another process, which also seeds the new database) is
    done, without a restart."""

    RECHECK_SECONDS = 1.0

    def __init__(self, db: Database):
        self.db = db
        self.behind = False
        self._checked = 0.0
        self._lock = threading.Lock()

    def still_behind(self) -> bool:
        if not self.behind:
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._checked < self.RECHECK_SECONDS:
                return self.behind
            self._checked = now
            try:
                self.behind = not self.db.is_current()
            except (OperationalError, DatabaseUnavailable):
                pass  # unreachable: still behind, as far as we know
            return self.behind


def _schema_gate():
    """Before every request: a 503 that says what to run while the schema is behind (``SchemaWatch``)."""
    if not current_app.extensions["queuelog"]["schema"].still_behind() or request.endpoint == "static":
        return None
    from queuelog.api.problems import problem
    from queuelog.extensions import login_manager

    if _is_api_request():
        return problem(503, "unavailable", SCHEMA_BEHIND, headers={"Retry-After": "5"})
    g._login_user = login_manager.anonymous_user()  # Flask-Login's slot: no look-up in the users table
    message = _(
        "The database schema is not up to date. The operator must run: %(command)s", command=UPGRADE_COMMAND
    )
    return render_template("error.html", code=503, message=message), 503, {"Retry-After": "5"}


def bootstrap(app: Flask) -> None:
    """First start of a new database: the job type allowlist, and the first admin (``first_start`` in
    queuelog/queue/admin.py, which ``flask db upgrade`` calls too)."""
    config = app.config["QUEUELOG"]
    ext = app.extensions["queuelog"]
    first_start(ext["queue"], ext["admin"], config["JOB_TYPES"], config["ADMIN_PASSWORD"], app.logger)


def register_blueprints(app: Flask) -> None:
    from queuelog import web
    from queuelog.api import JobIdConverter
    from queuelog.api import bp as api_bp
    from queuelog.extensions import csrf
    from queuelog.web.templating import register_templating

    app.url_map.converters["jobid"] = JobIdConverter
    # The API authenticates with keys, never with cookies: no CSRF check (its hook passes API requests by
    # too, _for_pages_only; this keeps the blueprint exempt should a route ever sit outside the mounts).
    csrf.exempt(api_bp)
    app.register_blueprint(api_bp)
    web.register(app)
    register_templating(app)
    app.extensions["queuelog"]["api_mounts"] = api_mounts(app)


def api_mounts(app: Flask) -> frozenset[str]:
    """The API's mount table: the first path segment of every route of the API blueprint ("jobs",
    "schedules", "openapi.json" ...), read from the app's URL map, so that it never disagrees with the
    routes. A path under one of them is the API's, whether or not a route matches it."""
    mounts = frozenset(
        rule.rule.split("/")[1] for rule in app.url_map.iter_rules() if rule.endpoint.startswith("api.")
    )
    pages = {
        rule.rule.split("/")[1] for rule in app.url_map.iter_rules() if not rule.endpoint.startswith("api.")
    }
    clash = mounts & pages
    if clash:  # a page under an API mount would get the API's errors and no session
        raise RuntimeError(f"pages and the JSON API share the path prefixes {sorted(clash)}")
    return mounts


def _is_api_request() -> bool:
    """API requests get problem+json errors: a path under an API mount, or a caller that wants JSON."""
    return is_api_path(current_app, request.path) or request.accept_mimetypes.best == "application/json"


def register_errorhandlers(app: Flask) -> None:
    from queuelog.api.problems import problem

    slugs = {
        400: "malformed-json",
        404: "not-found",
        405: "method-not-allowed",
        413: "payload-too-large",
        415: "unsupported-media-type",
        429: "rate-limited",
    }

    @app.errorhandler(CSRFError)
    def _csrf_error(exc: CSRFError):
        return render_template(
            "error.html",
            code=400,
            message=_(
                "The form expired or did not come from this site. Go back, reload the page and try again."
            ),
        ), 400

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if not _is_api_request() and exc.code in (403, 404, 405, 413, 429):
            messages = {
                403: _("You may not see this page."),
                404: _("There is no such page."),
                405: _("This page does not answer that method."),
                413: _("That was too large to send."),
                429: _("Too many requests. Wait a little and try again."),
            }
            return render_template("error.html", code=exc.code, message=messages[exc.code]), exc.code
        if _is_api_request():
            code = exc.code or 500
            detail = exc.description or exc.name
            if code == 413:
                detail = f"the request is larger than {app.config['MAX_CONTENT_LENGTH']} bytes"
            response = problem(
                code, slugs.get(code, "internal-error" if code >= 500 else "bad-request"), detail
            )
            if code == 405 and getattr(exc, "valid_methods", None):
                response.headers["Allow"] = ", ".join(exc.valid_methods)
            return response
        return exc

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        unavailable = as_unavailable(exc)
        if unavailable is not None:
            return database_unavailable(unavailable)
        if type(exc).__module__ == "gunicorn.http.errors":  # a malformed body, e.g. a broken chunk size
            app.logger.info("malformed request on %s %s: %r", request.method, request.path, exc)
            if _is_api_request():
                return problem(400, "malformed-request", "the request body is malformed")
            return render_template("error.html", code=400, message=_("The request was malformed.")), 400
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        if _is_api_request():
            return problem(500, "internal-error", "the server failed to handle the request")
        return render_template("error.html", code=500, message=_("Something went wrong on our side.")), 500


RETRY_AFTER = "1"  # seconds: a database that restarts is usually back within a few
UNAVAILABLE_DETAILS = {
    "unreachable": "the database cannot be reached; try again",
    "timeout": "the database did not answer in time (QUEUELOG_DB_STATEMENT_TIMEOUT); try again",
    "busy": "the database is busy; try again",
    "conflict": "the database is busy; try again",
    "full": "the database is full: nothing was written; try again when the operator has made room",
}


def database_unavailable(exc: DatabaseUnavailable):
    """The one answer to a request the database could not serve (drivers.as_unavailable reads every
    driver's errors into ``DatabaseUnavailable``): 503 with ``Retry-After``, problem+json for the API, a
    page for the rest; never a 500 (docs/operations.md#outages)."""
    from queuelog.api.problems import problem
    from queuelog.extensions import login_manager

    current_app.logger.warning(
        "database unavailable (%s) on %s %s: %s",
        exc.reason,
        request.method,
        request.path,
        str(exc).splitlines()[0] if str(exc) else "",
    )
    headers = {"Retry-After": RETRY_AFTER}
    if _is_api_request():
        return problem(
            503,
            "unavailable",
            UNAVAILABLE_DETAILS.get(exc.reason, UNAVAILABLE_DETAILS["busy"]),
            headers=headers,
        )
    g._login_user = login_manager.anonymous_user()  # the page must not look the login up in the database
    if exc.reason == "full":
        message = _("The database is full: nothing was saved. Try again when the operator has made room.")
    else:
        message = _("The database cannot be reached just now. Try again in a moment.")
    return render_template("error.html", code=503, message=message), 503, headers


def register_commands(app: Flask) -> None:
    from queuelog.cli import register

    register(app)


SECURITY_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    # API answers and pages hold job data, and one page shows a new API key once: keep them out of every
    # cache, the browser's included (static files alone may be cached).
    ("Cache-Control", "no-store"),
)


def _security_headers(response):
    """Add each of SECURITY_HEADERS the response does not set itself (one look at its headers: this runs
    on every request)."""
    headers = response.headers
    present = set(headers.keys(lower=True))
    static = request.endpoint == "static"
    for name, value in SECURITY_HEADERS:
        if name.lower() not in present and not (static and name == "Cache-Control"):
            headers.add(name, value)
    return response
