"""The pages: server-rendered, usable without JavaScript. They call the same queue layer as the API."""

from __future__ import annotations

from flask import render_template, request
from flask_babel import gettext as _
from flask_login import current_user

from queuelog.inputs import first_text_problem, text_problem
from queuelog.queue.principal import Principal
from queuelog.web.context import principal


def register(app) -> None:
    # types adds the job types' pages to admin's blueprint (before it is registered)
    from queuelog.web import admin, auth, batches, bulk, jobs, monitor, schedules, types  # noqa: F401

    for module in (auth, jobs, batches, admin, bulk, monitor, schedules):
        app.before_request_funcs.setdefault(module.bp.name, []).append(refuse_unstorable_text)
        app.register_blueprint(module.bp)
    monitor.install(app)
    app.context_processor(_principal_for_templates)


def _principal_for_templates() -> dict[str, Principal | None]:
    """``principal`` in every template: None for a visitor who is not logged in."""
    return {"principal": principal() if current_user.is_authenticated else None}


def refuse_unstorable_text():
    """One rule for every page: path segments, query parameters and form fields may not carry text that
    cannot be stored (NUL, lone surrogates). Answering 400 here keeps it out of every query and form."""
    path_values = [(k, v) for k, v in (request.view_args or {}).items() if isinstance(v, str)]
    found = first_text_problem(
        [*path_values, *request.args.items(multi=True), *request.form.items(multi=True)]
    )
    if found is None:
        return None
    name = found[0][:64] if text_problem(found[0]) is None else "?"
    message = _(
        "The field “%(field)s” contains characters that cannot be used (such as the NUL character). "
        "Go back, remove them and try again.",
        field=name,
    )
    return render_template("error.html", code=400, message=message), 400
