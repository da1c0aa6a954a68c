"""gunicorn's gthread worker, with new connections spread evenly over the worker processes.

Every worker process waits on the one listening socket, and whichever wakes first accepts a new
connection. A client that keeps its connection alive (``queuelog-worker``, ``queuelog.client``) then
stays with that process. With a handful of such clients, the race often leaves one process with most of
them: with four connections on two processes, three on one in most starts. A Python process runs its
threads one at a time, so that process serves three clients on one core while the other core waits
(docs/performance.md#connections-spread-over-the-processes measured it).

Here a process that holds more connections than a sibling leaves a new connection to the sibling: it
stops listening for up to ``WAIT`` seconds, serving its own connections meanwhile, and takes the
connection itself if it is still waiting then. A sibling that let one wait so is passed over for
``PASS_OVER`` seconds (it may be busy or stopped), and a sibling that does not listen (at gunicorn's
connection bound, or stopping) is never waited for. The processes publish their connection counts in
memory shared through gunicorn's fork. With ``--reuse-port`` each process has a socket of its own, which
the kernel picks by a hash of the connection: this worker then behaves as gthread does.
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
# How long a busier process leaves a new connection to a less busy sibling: several of Python's switch
# intervals (5 ms), since the sibling's listening thread may wait that long for its turn to run.
WAIT = 0.02
_LOOK = 0.001  # how often (seconds) a process that leaves a connection to a sibling looks again
PASS_OVER = 1.0  # how long a sibling that let a connection wait is passed over
CLOSED = 2**31 - 1  # the count a process publishes while it does not listen: nobody leaves it anything


class _Counts:
    """The connection count of each worker process, in memory shared across gunicorn's fork: slot i
    holds a process id and its count. A process takes a free slot when it starts serving (one whose
    process is gone), under a lock shared the same way."""

    def __init__(self) -> None:
        self.pids = multiprocessing.RawArray(ctypes.c_int, SLOTS)
        self.conns = multiprocessing.RawArray(ctypes.c_int, SLOTS)
        self.lock = multiprocessing.Lock()

    def take_slot(self) -> int | None:
        me = os.getpid()
        if not self.lock.acquire(timeout=1):  # a process killed while holding it: take no part
            return None
        try:
            for slot in range(SLOTS):
                pid = self.pids[slot]
                if pid in (0, me) or not _alive(pid):  # me: a slot left by a dead process of my id
                    self.pids[slot] = me
                    self.conns[slot] = CLOSED
                    return slot
        finally:
            self.lock.release()
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user took the id: not ours, but it exists
        return True
    return True


class _Place:
    """A worker process's slot in the shared counts, and the siblings it passes over for now."""

    def __init__(self, counts: _Counts, slot: int) -> None:
        self.counts = counts
        self.slot = slot
        self.passed_over: dict[int, float] = {}  # sibling slot -> until when (monotonic)

    def publish(self, conns: int) -> None:
        self.counts.conns[self.slot] = conns

    def leave(self) -> None:
        self.counts.pids[self.slot] = 0

    def sibling_with_fewer(self, mine: int) -> int | None:
        """A live sibling that listens and holds fewer connections than ``mine`` (its slot), if any."""
        pids, conns, now = self.counts.pids, self.counts.conns, time.monotonic()
        for other in range(SLOTS):
            if pids[other] and other != self.slot and conns[other] < mine:
                if self.passed_over.get(other, 0.0) <= now and _alive(pids[other]):
                    return other
        return None


class ThreadWorker(gthread.ThreadWorker):
    """gunicorn's ``gthread`` worker that spreads kept-alive connections evenly over the processes
    (``worker_class`` in queuelog/gunicorn_conf.py; the module's docstring says how)."""

    _counts: _Counts | None = None
    # This process's state (set again by ``run``): its place in the counts, whether gunicorn has it
    # listen, and the connection it leaves to a sibling.
    _place: _Place | None = None
    _listening = False
    _left_until: float | None = None
    _left_to: int | None = None
    _take_next = False

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        """Runs once in gunicorn's master, before it forks the first workers (a HUP reload keeps the
        counts; its new workers take the slots of the old ones as those exit)."""
        super().check_config(cfg, log)
        ThreadWorker._counts = None if cfg.reuse_port else _Counts()

    def run(self) -> None:
        """Take part once the app is loaded (a process still loading it listens to nothing yet), and
        leave the shared counts when the loop ends."""
        slot = self._counts.take_slot() if self._counts is not None else None
        self._place = _Place(self._counts, slot) if self._counts is not None and slot is not None else None
        try:
            super().run()
        finally:
            if self._place is not None:
                self._place.leave()

    def set_accept_enabled(self, enabled: bool) -> None:
        # gunicorn's run loop calls this every turn with whether it may take more connections.
        self._listening = enabled
        if enabled and self._left_until is not None:
            return  # listen again when the wait for the sibling ends
        super().set_accept_enabled(enabled)
        self._publish()

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._left_until is not None and self._place is not None:
            # Look again every millisecond: the sibling may take the connection, or others (and stop
            # holding fewer: two processes may leave connections to each other at once).
            timed_out = time.monotonic() >= self._left_until
            if timed_out or self._place.sibling_with_fewer(self.nr_conns) is None:
                self._stop_leaving(timed_out)
            else:
                timeout = min(timeout, _LOOK)
        self._publish()  # once a turn of the loop: connections close in several places
        super().wait_for_and_dispatch_events(timeout)

    def accept(self, listener: Any) -> None:
        place = self._place
        if place is not None and not self._take_next:
            sibling = place.sibling_with_fewer(self.nr_conns)
            if sibling is not None:
                self._left_until = time.monotonic() + WAIT
                self._left_to = sibling
                super().set_accept_enabled(False)  # serve this process's connections meanwhile
                return
        self._take_next = False
        super().accept(listener)
        self._publish()

    def _stop_leaving(self, timed_out: bool) -> None:
        """Listen again: no sibling holds fewer connections now, or the wait for it ended (then take the
        connection if it still waits, and pass the sibling over for a while)."""
        waiting = timed_out and bool(select.select(self.sockets, [], [], 0)[0])
        if waiting and self._place is not None and self._left_to is not None:
            self._place.passed_over[self._left_to] = time.monotonic() + PASS_OVER
        self._take_next = waiting
        self._left_until = self._left_to = None
        super().set_accept_enabled(self._listening)

    def _publish(self) -> None:
        if self._place is not None:
            self._place.publish(self.nr_conns if self._listening else CLOSED)


WORKER_CLASS = f"{__name__}.{ThreadWorker.__qualname__}"  # as gunicorn's --worker-class names it
