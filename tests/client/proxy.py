"""A small real TCP proxy in front of the live server, which misbehaves on cue.

Each new connection takes the next action of its script (then "forward" once the script runs out):

- "forward": pass each request to the server and its answer back, until either side closes;
- "drop": read one request, forward it, wait until the server's answer starts (so the server has acted on
  it), then close both sides without passing the answer on: the client sees the connection drop;
- "hang": read the request and never answer (until the client gives up and closes);
- "502": answer the request with an HTML 502 page, as a load balancer with no server behind it does;
- a ``bytes`` value: answer the request with those bytes (a whole HTTP response) and close;
- a tuple of these: one per request on that connection, in turn, so that ``("forward", "drop")`` drops a
  kept-alive connection at its second request; "close" in a tuple closes the connection, idle, as a
  server's keep-alive timeout does, as soon as the request before it was answered.

It relays one whole request and one whole answer at a time, and records the raw bytes of every request
(``requests``), so a test can see what the client sent on each attempt.
"""

from __future__ import annotations

import socket
import threading

BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: 73\r\n\r\n"
    b"<html><body><h1>502 Bad Gateway</h1><p>no server is up</p></body></html>\n"
)


def canned(status: str, body: bytes, content_type: str, *extra: str) -> bytes:
    """A whole HTTP/1.1 response that closes its connection."""
    head = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", "Connection: close"]
    head += [*extra, f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def read_message(sock: socket.socket) -> bytes:
    """One whole HTTP request or answer (headers and a Content-Length body) from ``sock``; b"" when the
    other side closed first. (The server's answers all carry a Content-Length.)"""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class FlakyProxy:
    """Listens on 127.0.0.1 (``url``) and relays to ``upstream_port`` as its script says."""

    def __init__(self, upstream_port: int, script: list[str | bytes | tuple] | None = None):
        self.upstream_port = upstream_port
        self.script = list(script or [])
        self.requests: list[bytes] = []  # every request, as the client sent it
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.connections += 1
                action = self.script.pop(0) if self.script else "forward"
            threading.Thread(target=self._serve, args=(client, action), daemon=True).start()

    def _serve(self, client: socket.socket, script: str | bytes | tuple) -> None:
        steps = list(script) if isinstance(script, tuple) else []
        action = script
        with client, socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
            while True:
                if isinstance(script, tuple):
                    action = steps.pop(0) if steps else "forward"
                    if action == "close":
                        client.shutdown(socket.SHUT_RDWR)
                        return
                request = read_message(client)
                if not request:
                    return
                with self._lock:
                    self.requests.append(request)
                if action == "forward":
                    upstream.sendall(request)
                    answer = read_message(upstream)
                    if not answer:
                        return
                    client.sendall(answer)
                    continue
                if action == "drop":
                    upstream.sendall(request)
                    upstream.recv(1)  # the answer has begun: the server has done the work
                    client.shutdown(socket.SHUT_RDWR)
                elif action == "hang":
                    client.recv(1)  # returns when the client closes the connection
                else:
                    client.sendall(BAD_GATEWAY if action == "502" else action)
                return
