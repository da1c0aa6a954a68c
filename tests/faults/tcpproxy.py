"""A TCP relay in front of a database server that drops and stalls its connections on cue (standard
library only): ``forward`` relays bytes both ways; ``stall()`` stops relaying on every connection, old and
new, while keeping them open (a server or a network that stopped answering without a word); ``drop()``
closes every open connection at once (a restart, a failover, a dead route); ``resume()`` relays again."""

from __future__ import annotations

import select
import socket
import threading


class TcpProxy:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._running = threading.Event()
        self._running.set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def drop(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._running.set()
        self._listener.close()
        self.drop()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        other = {client: upstream, upstream: client}
        try:
            while not self._closed:
                self._running.wait()
                ready, _, _ = select.select([client, upstream], [], [], 0.05)
                if not self._running.is_set():
                    continue  # stalled: what arrives stays unread in the kernel's buffers
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    other[sock].sendall(data)
        except (OSError, ValueError):
            return  # dropped: drop() may close a socket while select() or recv() holds it (ValueError: fd -1)
        finally:
            for sock in (client, upstream):
                try:
                    sock.close()
                except OSError:
                    pass
