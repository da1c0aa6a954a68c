"""The transport (queuelog/wire/transport.py) against a server in front of queuelog that, like some proxies,
writes ``408 Request Timeout`` when it closes a kept-alive connection left idle: what it left on the socket
answers no request of ours, whether the request may be sent twice or not."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from queuelog.wire.transport import Transport


class IdleClosingServer:
    """Answers each request 200 with its path, then closes the connection after writing a 408."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as stream:
            line = stream.readline()
            length = 0
            while (header := stream.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            stream.read(length)
            body = json.dumps({"path": line.split()[1].decode()}).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            )
            conn.sendall(body)
            time.sleep(0.1)  # idle: the proxy gives up on the connection
            conn.sendall(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.closed.set()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server():
    made = IdleClosingServer()
    yield made
    made.close()


@pytest.mark.parametrize("repeatable", [True, False])
def test_a_request_on_a_connection_closed_with_a_408_is_answered_by_its_own_server(server, repeatable):
    transport = Transport(f"http://127.0.0.1:{server.port}", "key")
    try:
        assert transport.send("GET", "/first").body == {"path": "/first"}
        assert server.closed.wait(5)
        time.sleep(0.05)  # the 408 and the close have reached the client's socket
        answer = transport.send("POST", "/second", {"pad": "x" * 100}, repeatable=repeatable)
        assert (answer.status, answer.body) == (200, {"path": "/second"})
    finally:
        transport.close()
