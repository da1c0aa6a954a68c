"""A small HTTP client for the JSON API, on the standard library only (workers stay light).

The server reports every error as an RFC 9457 problem document (``type``, ``title``, ``status``,
``detail``); :func:`describe` turns one into a single line, and the exceptions below carry it.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
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


class TransientError(Exception):
    """The server could not be reached or could not answer now (connection error, timeout, 5xx, 429):
    the same request may well succeed later."""


class RequestRefused(Exception):
    """The server answered with a 4xx: the request itself is wrong, and repeating it will not help.

    ``status`` is the HTTP status, ``body`` the decoded answer (a problem document as a dict, or text),
    ``problem_type`` the problem's ``type`` (e.g. "/problems/not-lease-holder") when there is one.
    """

    def __init__(self, status: int, body: Any):
        super().__init__(describe(status, body))
        self.status = status
        self.body = body
        self.problem_type: str | None = body.get("type") if isinstance(body, dict) else None


class LeaseLost(RequestRefused):
    """A report or heartbeat for a held job was refused with 404 or 409: the job is no longer this
    worker's (its lease expired and it was handed out again, or it is gone)."""


class QueueClient:
    """Talks to one queuelog server with one worker key. One keep-alive connection per thread."""

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

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        """Send one request; returns the decoded JSON answer (None when empty).

        Raises TransientError (no answer, 5xx, 429) or RequestRefused (any other 4xx).
        """
        payload = None if body is None else json.dumps(body)
        for attempt in (1, 2):
            conn = self._connection(timeout or self.timeout)
            reused = conn.sock is not None
            try:
                conn.request(method, self.prefix + path, body=payload, headers=self.headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A kept-alive connection the server had already closed: the request never reached it.
                self._drop_connection()
                if not (reused and attempt == 1):
                    raise TransientError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                raise TransientError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
        try:
            decoded = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        if response.status >= 500 or response.status == 429:
            raise TransientError(f"{method} {path}: {describe(response.status, decoded)}")
        if response.status >= 400:
            raise RequestRefused(response.status, decoded)
        return decoded

    def _held_job_request(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A report or heartbeat for a held job: 404 and 409 mean the job is no longer ours, but for a 409
        invalid-state (a snooze over the limit, a cancellation nobody asked for), which stays a
        RequestRefused."""
        try:
            return self.request("POST", path, body)
        except RequestRefused as exc:
            if exc.status in (404, 409) and exc.problem_type != "/problems/invalid-state":
                raise LeaseLost(exc.status, exc.body) from None
            raise

    # -- the worker endpoints -----------------------------------------------------------------------

    def claim(
        self,
        *,
        limit: int,
        wait_seconds: float,
        types: list[str] | None = None,
        lease_seconds: int | None = None,
    ) -> list[dict[str, Any]]:
        """Claim up to ``limit`` jobs, waiting up to ``wait_seconds`` on the server when there are none."""
        body: dict[str, Any] = {"limit": limit, "wait_seconds": wait_seconds}
        if types:
            body["types"] = types
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        return self.request("POST", "/jobs/claim", body, timeout=wait_seconds + self.timeout)["jobs"]

    def complete_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Complete held jobs in one request; one result per item, each with its own status."""
        return self.request("POST", "/jobs/complete", {"jobs": items})["results"]

    def fail(self, job_id: int, lease_token: str, error: str, *, retryable: bool) -> dict[str, Any]:
        """Report a failed attempt; returns the job ("pending" again when it will be retried)."""
        body = {"lease_token": lease_token, "error": error, "retryable": retryable}
        return self._held_job_request(f"/jobs/{job_id}/fail", body)

    def heartbeat(
        self,
        job_id: int,
        lease_token: str,
        lease_seconds: int,
        *,
        progress: int | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Extend a held job's lease, with a progress report when given; returns the job (whose
        ``cancel_requested`` says whether to stop it)."""
        body: dict[str, Any] = {"lease_token": lease_token, "lease_seconds": lease_seconds}
        if progress is not None:
            body["progress"] = progress
        if message is not None:
            body["progress_message"] = message
        return self._held_job_request(f"/jobs/{job_id}/heartbeat", body)

    def snooze(self, job_id: int, lease_token: str, delay_seconds: float) -> dict[str, Any]:
        """Hand a held job back to run after ``delay_seconds``; returns the job (pending, or cancelled
        when that was requested)."""
        body = {"lease_token": lease_token, "delay_seconds": delay_seconds}
        return self._held_job_request(f"/jobs/{job_id}/snooze", body)

    def cancelled(self, job_id: int, lease_token: str) -> dict[str, Any]:
        """Report that a held job stopped because its cancellation was requested; returns the job."""
        return self._held_job_request(f"/jobs/{job_id}/cancelled", {"lease_token": lease_token})
