"""The HTTP transport shared by the worker client and the producer client, on the standard library only.

One keep-alive connection per thread; JSON bodies out, decoded answers back. What counts as an error,
and whether to try again, is each client's policy. The transport itself sends a request a second time in
one case only: a kept-alive connection that failed before any byte of the answer came, for a request the
caller says may be repeated (``repeatable``). Such a failure usually means the server had closed the idle
connection, but it can also mean the server acted on the request and then dropped the connection, so a
request that must not be sent twice is never sent again: before it goes out on a kept-alive connection,
the connection is checked, and one the server has already closed is replaced by a new one.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
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
    other text as a string, nothing as None); ``sends``: how many times the request went out for it (2
    when a kept-alive connection failed and it was sent again)."""

    status: int
    headers: http.client.HTTPMessage
    body: Any
    sends: int = 1

    @property
    def retry_after(self) -> float | None:
        """The seconds its ``Retry-After`` header asks to wait (delta-seconds: digits), or None."""
        value = self.headers.get("Retry-After", "").strip()
        return float(value) if value.isdigit() else None


class NoAnswer(Exception):
    """The request got no answer: the connection failed, was dropped, or timed out. The server may or may
    not have acted on it; ``sends`` says how many times it went out."""

    def __init__(self, message: str, sends: int = 1):
        super().__init__(message)
        self.sends = sends


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

    def _fresh(self, conn: http.client.HTTPConnection) -> bool:
        """Whether a kept-alive connection still looks open: a socket with something to read before any
        request was sent holds the server's close (or stray bytes), so it must not be used."""
        try:
            if hasattr(select, "poll"):  # select() cannot take a descriptor above 1023
                poller = select.poll()
                poller.register(conn.sock, select.POLLIN)
                return not poller.poll(0)
            readable, _, _ = select.select([conn.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        """Close this thread's connection (the next request opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def cut(self) -> None:
        """End the calling thread's wait for an answer at once: its request fails with NoAnswer and is not
        sent again. For a signal handler, which runs in the thread that waits (queuelog-worker's stop,
        when a claim gets no answer)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            self._local.cut = True
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        repeatable: bool = True,
    ) -> Answer:
        """Send one request (``body`` as JSON) and read the whole answer; raises NoAnswer.

        ``repeatable`` says whether the request may be sent a second time when a kept-alive connection
        fails before any byte of the answer came (a read, a request with an idempotency key). When it is
        false the request goes out at most once: the connection is checked before it is reused, and a
        failure is raised as NoAnswer (the server may or may not have acted on it)."""
        payload = None if body is None else json.dumps(body)
        all_headers = {**self.headers, **headers} if headers else self.headers
        self._local.cut = False
        for attempt in (1, 2):
            conn = self._connection(timeout or self.timeout)
            reused = conn.sock is not None
            if reused and not repeatable and not self._fresh(conn):
                self.close()
                conn, reused = self._connection(timeout or self.timeout), False
            answered = False  # whether any byte of the answer came
            cut = False  # whether the server stopped reading before the request ended
            try:
                try:
                    conn.request(method, self.prefix + path, body=payload, headers=all_headers)
                except (BrokenPipeError, ConnectionResetError):
                    # On a new connection, the server stopped reading before the body ended: it answered
                    # early (413 for a body past its limit) and closed; its answer is read if it came, and
                    # if none did, reading fails as a dropped connection does, below. On a reused one, what
                    # it left before closing answers nothing of ours (a 408 for the idle connection, say):
                    # that request fails as before, and is sent again on a new connection if it may be.
                    if reused or conn.sock is None:
                        raise
                    cut = True
                response = conn.getresponse()
                answered = True
                data = response.read()
                if cut:
                    self.close()  # the server has closed its side
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # Most often a kept-alive connection the server had closed: the request never reached it.
                # But the server may have acted on it and dropped the connection before answering.
                self.close()
                if answered or self._local.cut or not (reused and repeatable and attempt == 1):
                    raise NoAnswer(f"{method} {path}: {exc.__class__.__name__}: {exc}", attempt) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise NoAnswer(f"{method} {path}: {exc.__class__.__name__}: {exc}", attempt) from exc
        try:
            decoded = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        return Answer(response.status, response.headers, decoded, attempt)
