"""queuelog's gunicorn worker spreads kept-alive connections evenly over the worker processes
(queuelog/gunicorn_worker.py), through a real gunicorn: which process holds each connection is read from
Linux's /proc."""

from __future__ import annotations

import http.client
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from queuelog.bench.http import connections_by_process

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads connections from Linux's /proc"),
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),  # the database plays no part
]


def worker_pids(server) -> list[int]:
    master = server.proc.pid
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def holders(server, pids: list[int]) -> dict[int, int]:
    """How many established connections to the server each of ``pids`` holds."""
    return connections_by_process(server.port, pids)


def kept_alive(server, count: int, *, at_once: bool) -> list[http.client.HTTPConnection]:
    """``count`` connections that each made one request and stay open; opened together or one by one."""
    connections = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(count)]
    statuses: list[int] = []
    start = threading.Barrier(count if at_once else 1)

    def ask(conn: http.client.HTTPConnection) -> None:
        start.wait()
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)

    if at_once:
        threads = [threading.Thread(target=ask, args=(conn,)) for conn in connections]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        for conn in connections:
            ask(conn)
    assert statuses == [200] * count
    return connections


def serving(server) -> list[int]:
    """The worker processes, once each has accepted a connection (so has loaded the app and listens)."""
    pids = worker_pids(server)
    assert len(pids) == 2
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while seen != set(pids) and time.monotonic() < deadline:
        (conn,) = kept_alive(server, 1, at_once=False)
        counts = settled(server, pids, None)
        seen.update(pid for pid, count in counts.items() if count)
        conn.close()
        settled(server, pids, {pid: 0 for pid in pids})
    assert seen == set(pids), "a worker process never took a connection"
    return pids


def settled(server, pids: list[int], expected: dict[int, int] | None) -> dict[int, int]:
    """The holders once they match ``expected`` (None: once one holds a connection), or after 5 s: a
    connection shows up a moment after its answer, and goes a moment after it closes."""
    deadline = time.monotonic() + 5
    counts = holders(server, pids)
    while (counts != expected if expected else not any(counts.values())) and time.monotonic() < deadline:
        time.sleep(0.05)
        counts = holders(server, pids)
    return counts


def spread_evenly(server, pids: list[int], count: int, *, at_once: bool) -> None:
    """``count`` kept-alive connections are each held, and by each process the same number."""
    connections = kept_alive(server, count, at_once=at_once)
    try:
        share = {pid: count // len(pids) for pid in pids}
        assert settled(server, pids, share) == share
    finally:
        for conn in connections:
            conn.close()


@pytest.mark.parametrize("at_once", [True, False], ids=["opened-together", "opened-one-by-one"])
def test_each_process_holds_an_equal_share_of_the_connections(live_server, at_once):
    server = live_server(workers=2, threads=4)
    spread_evenly(server, serving(server), 8, at_once=at_once)  # 4 and 4, never 5 and 3


def test_a_stopped_process_does_not_hold_back_a_connection(live_server):
    """A process that holds more connections leaves a new one to a sibling for a moment only: a sibling
    that does not take it (stopped here) is passed over, and the connection is answered."""
    server = live_server(workers=2, threads=4)
    stopped, running = serving(server)
    os.kill(stopped, signal.SIGSTOP)
    connections: list[http.client.HTTPConnection] = []
    try:
        started = time.monotonic()
        connections = kept_alive(server, 3, at_once=False)  # the second and third find the sibling idle
        took = time.monotonic() - started
        assert settled(server, [stopped, running], {stopped: 0, running: 3}) == {stopped: 0, running: 3}
        assert took < 3, f"three requests took {took:.1f} s"
    finally:
        os.kill(stopped, signal.SIGCONT)
        for conn in connections:
            conn.close()


def test_a_replaced_process_takes_its_share(live_server):
    """A worker process that dies is replaced by gunicorn; the new one takes the dead one's place in the
    shared counts, and its share of the connections."""
    server = live_server(workers=2, threads=4)
    first = worker_pids(server)
    os.kill(first[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = worker_pids(server)
        if len(pids) == 2 and first[0] not in pids:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"gunicorn did not replace {first[0]}")
    spread_evenly(server, serving(server), 4, at_once=False)
