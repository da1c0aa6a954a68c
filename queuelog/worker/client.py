"""A small HTTP client for the JSON API, on the standard library only (workers stay light)."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit


class TransientError(Exception):
    """The server could not be reached or could not answer now (connection error, timeout, 5xx, 429):
    the same request may well succeed later."""


class RequestRefused(Exception):
    """The server answered with a 4xx: the request itself is wrong, and repeating it will not help."""

    def __init__(self, status: int, body: Any):
        detail = body.get("detail") if isinstance(body, dict) else body
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.body = body


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

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> tuple[int, Any]:
        """Send one request; returns (status, decoded JSON or None). Raises TransientError or RequestRefused."""
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
            raise TransientError(f"{method} {path}: HTTP {response.status}")
        if response.status >= 400 and response.status not in (404, 409):
            raise RequestRefused(response.status, decoded)
        return response.status, decoded

    # -- the worker endpoints -----------------------------------------------------------------------

    def claim(
        self,
        *,
        limit: int,
        wait_seconds: float,
        types: list[str] | None = None,
        lease_seconds: int | None = None,
    ) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"limit": limit, "wait_seconds": wait_seconds}
        if types:
            body["types"] = types
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        status, answer = self.request("POST", "/jobs/claim", body, timeout=wait_seconds + self.timeout)
        if status != 200:
            raise RequestRefused(status, answer)
        return answer["jobs"]

    def complete_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        status, answer = self.request("POST", "/jobs/complete", {"jobs": items})
        if status != 200:
            raise RequestRefused(status, answer)
        return answer["results"]

    def fail(self, job_id: int, lease_token: str, error: str, *, retryable: bool) -> int:
        body = {"lease_token": lease_token, "error": error, "retryable": retryable}
        return self.request("POST", f"/jobs/{job_id}/fail", body)[0]

    def heartbeat(self, job_id: int, lease_token: str, lease_seconds: int) -> int:
        body = {"lease_token": lease_token, "lease_seconds": lease_seconds}
        return self.request("POST", f"/jobs/{job_id}/heartbeat", body)[0]
