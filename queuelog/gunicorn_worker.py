"""gunicorn's gthread worker, with new connections spread evenly over the worker processes.

Every worker process waits on the one listening socket, and whichever wakes first accepts a new
connection. A client that keeps its connection alive (``queuelog-worker``, ``queuelog.client``) then
stays with that process. With a handful of such clients, the race often leaves one process with most of
them: with four connections on two processes, three on one in most starts. A Python process runs its
threads one at a time, so that process serves three clients on one core while the other core waits:
``queuelog-bench http`` measured 975 enqueues a second on a 3/1 split against 1,450 on a 2/2 split
(docs/performance.md#connections-spread-over-the-processes).

Here a process that holds more connections than one of its siblings leaves a new connection to the
sibling for up to ``WAIT`` seconds, and takes it itself after that (the sibling may be busy or stuck).
The processes publish their connection counts in shared memory made by gunicorn's master before it
forks them. With ``--reuse-port`` each process has a socket of its own and the kernel spreads the
connections instead: this worker then behaves as gthread does.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import select
import time
from typing import Any

from gunicorn.workers import gthread

SLOTS = 256  # worker processes that can take part; more than that accept as gthread does
WAIT = 0.005  # how long (seconds) a busier process leaves a new connection to a less busy sibling
_NAP = 0.0002  # the pause between two looks at a connection left to a sibling (seconds)


class _Counts:
    """The connection count of each worker process, in memory shared across gunicorn's fork: slot i
    holds a process id and its count. A process takes a free slot when it starts (one whose process is
    gone), under a lock shared the same way."""

    def __init__(self) -> None:
        self.pids = multiprocessing.RawArray(ctypes.c_int, SLOTS)
        self.conns = multiprocessing.RawArray(ctypes.c_int, SLOTS)
        self.lock = multiprocessing.Lock()

    def take_slot(self) -> int | None:
        with self.lock:
            for slot in range(SLOTS):
                pid = self.pids[slot]
                if pid == 0 or not _alive(pid):
                    self.pids[slot] = os.getpid()
                    self.conns[slot] = 0
                    return slot
        return None

    def fewer_elsewhere(self, slot: int, mine: int) -> bool:
        """Does another live process hold fewer connections than ``mine``?"""
        pids, conns = self.pids, self.conns
        return any(
            pids[other] and other != slot and conns[other] < mine and _alive(pids[other])
            for other in range(SLOTS)
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user took the id: not ours, but it exists
        return True
    return True


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's ``gthread`` worker that spreads kept-alive connections evenly over the processes
    (``worker_class`` in queuelog/gunicorn_conf.py; the module's docstring says why)."""

    _counts: _Counts | None = None

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        """Runs in gunicorn's master before it forks the workers: the shared counts are made here."""
        super().check_config(cfg, log)
        ThreadWorker._counts = None if cfg.reuse_port else _Counts()

    _slot: int | None = None

    def run(self) -> None:
        """Take part once the app is loaded: a process still loading it is nobody's sibling yet."""
        self._slot = self._counts.take_slot() if self._counts is not None else None
        super().run()

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        self._publish()  # once a turn of the loop: connections close in several places
        super().wait_for_and_dispatch_events(timeout)

    def accept(self, listener: Any) -> None:
        deadline = None
        while self._slot is not None and self._counts.fewer_elsewhere(self._slot, self.nr_conns):
            now = time.monotonic()
            if deadline is None:
                deadline = now + WAIT
            elif now >= deadline:
                break  # the sibling is busy or stuck: take the connection after all
            time.sleep(_NAP)
            if not select.select([listener], [], [], 0)[0]:
                return  # a sibling took it
        super().accept(listener)
        self._publish()

    def _publish(self) -> None:
        if self._slot is not None and self._counts is not None:
            self._counts.conns[self._slot] = self.nr_conns
