"""Which requests have a session: the pages' requests do, the JSON API's do not. The app factory installs
``ApiFreeSessions`` (queuelog/factory.py) and the console's live refresh refines it (web/monitor.py); it lives
here, below both, so that the web package does not import the factory back."""

from __future__ import annotations

from flask import Flask, Request
from flask.sessions import SecureCookieSessionInterface


def is_api_path(app: Flask, path: str) -> bool:
    """Whether ``path`` lies under one of the API's mounts (``api_mounts``)."""
    return path.split("/", 2)[1] in app.extensions["queuelog"]["api_mounts"]


class ApiFreeSessions(SecureCookieSessionInterface):
    """Sessions for the pages only. The JSON API never reads cookies (docs/api.md#authentication-and-errors): its requests get
    Flask's null session, so that no cookie is decoded, checked or signed on its hot path."""

    def open_session(self, app: Flask, request: Request):
        # By path: Flask opens the session before it matches the URL to a view.
        if is_api_path(app, request.path):
            return None  # Flask puts a null session in its place, which nothing can write to
        return super().open_session(app, request)
