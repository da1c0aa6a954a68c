"""The HTTP transport shared by the worker client and the producer client, on the standard library only.

One keep-alive connection per thread; JSON bodies out, decoded answers back. It does no retrying of its
own beyond one case that is always safe: a kept-alive connection the server had already closed before
it read anything. What counts as an error, and whether to try again, is each client's policy.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any, NamedTuple
from urllib.parse import urlsplit

MAX_BODY_IN_MESSAGE = 200  # characters of a non-problem error body kept in an exception's message


def describe(status: int, body: Any) -> str:
    """One line for an error answer: "HTTP 409 Not the lease holder: job 5 is ..." for a problem document,
    the start of the body for anything else (a proxy's HTML page, say)."""
    text = f"HTTP {status}"
    if isinstance(body, dict):
        if body.get("title"):
            text += f" {body['title']}"
        if body.get("detail"):
            text += f": {body['detail']}"
    elif body:
        text += ": " + " ".join(str(body).split())[:MAX_BODY_IN_MESSAGE]
    return text


class Answer(NamedTuple):
    """What the server answered: the status, its headers, and the body decoded (JSON as Python values,
    other text as a string, nothing as None)."""

    status: int
    headers: http.client.HTTPMessage
    body: Any


class NoAnswer(Exception):
    """The request got no answer: the connection failed, was dropped, or timed out. The server may or may
    not have acted on it."""


class Transport:
    """Sends requests to one queuelog server with one API key."""

    def __init__(self, url: str, key: str, *, timeout: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        # The server's address as it may be logged: without any user:password@ part.
        self.url = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{self.prefix}"
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self._local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = cls(self.host, self.port, timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def close(self) -> None:
        """Close this thread's connection (the next request opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """Send one request (``body`` as JSON) and read the whole answer; raises NoAnswer."""
        payload = None if body is None else json.dumps(body)
        all_headers = {**self.headers, **headers} if headers else self.headers
        for attempt in (1, 2):
            conn = self._connection(timeout or self.timeout)
            reused = conn.sock is not None
            try:
                conn.request(method, self.prefix + path, body=payload, headers=all_headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A kept-alive connection the server had already closed: the request never reached it.
                self.close()
                if not (reused and attempt == 1):
                    raise NoAnswer(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise NoAnswer(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
        try:
            decoded = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        return Answer(response.status, response.headers, decoded)
