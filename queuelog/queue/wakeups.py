"""Wake-ups: how a waiting long poll learns that jobs became claimable, in this process and in the others
(docs/operations.md#wake-ups).

A waiting long poll registers a ``Waiter`` and sleeps on its own event: it holds no database connection
and runs no query until it is woken. ``Wakeups.ready(types)`` is the one call for "jobs of these types are
claimable now (or at ``due``)": it wakes one sleeping waiter per type here (a waiter whose claim comes back
full wakes the next one, so a burst is shared without waking every waiter for every job), and reaches the
other processes:

- PostgreSQL: triggers on ``jobs`` (migrations 0012, 0014 and 0015) send ``NOTIFY`` in the very
  transaction that makes a row pending (an insert, a retry, a backoff, a snooze, a settled lease) or frees
  room under a concurrency limit (the end of a job its claim marked ``holds_slot``); each server process
  keeps one listening connection and fans the notifications out to its waiters.
- SQLite: every process with waiters binds a datagram socket in a folder beside the database file; ``ready``
  sends one datagram to each of the others after the commit.

A job that becomes claimable later (a delay, a backoff, a snooze) comes with its due time: a timer in each
listening process wakes a waiter when it comes. A slow safety-net probe (one cheap read per process every
``safety_net`` seconds, and only while the process has waiters) finds what a lost notification or the clock
alone made claimable (an expired lease, new rate-limit tokens). In poll mode (``QUEUELOG_WAKEUPS=poll``, for
PgBouncer in transaction mode, where LISTEN does not work) there are no signals: the probe runs every
``poll_interval`` instead.

The same listener hears that API keys or users changed (migration 0013): ``keys_generation`` then moves on,
and each key check cached under an older generation is read again (queue/admin.py). A listener that has
heard nothing for ``_QUIET_SECONDS`` sends itself a notification through the pool; one that then stays deaf
for ``_DEAF_SECONDS`` more reconnects, and meanwhile no key check is served from the cache.
"""

from __future__ import annotations

import errno
import hashlib
import heapq
import itertools
import logging
import os
import secrets
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from queuelog.db import Database

log = logging.getLogger("queuelog.wakeups")

MODES = ("signal", "poll")
KEYS_CHANGED = "keys"  # the payload of migration 0013's triggers: API keys or users changed
HELLO = "hello "  # the start of a listener's own check that notifications reach it
_RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)
MAX_TIMERS = 10000  # due times a process keeps (the safety net finds the others)
_Key = tuple[str, ...] | None  # a waiter's types, sorted; None: any type


def channel_name(schema: str) -> str:
    """The PostgreSQL channel of one installation (the triggers of migrations 0012, 0013 and 0014 name it
    the same way)."""
    return f"queuelog_jobs:{schema}"


class WaitingPollsFull(Exception):
    """This process has as many waiting long polls as it allows (``max_waiting``)."""


class Waiter:
    """One waiting long poll: its types, and the event its wake-up sets."""

    __slots__ = ("types", "event", "sleeping", "woken_for")

    def __init__(self, types: _Key):
        self.types = types
        self.event = threading.Event()
        self.sleeping = False
        self.woken_for: frozenset[str] | None = None

    def wants(self, types: frozenset[str] | None) -> bool:
        return self.types is None or types is None or not types.isdisjoint(self.types)


class Wakeups:
    """One process's wake-ups (one per ``Queue``)."""

    def __init__(
        self,
        db: Database,
        probe: Callable[[list[str] | None], bool],
        *,
        mode: str = "signal",
        safety_net: float = 5.0,
        poll_interval: float = 0.2,
        max_waiting: int = 500,
    ):
        if mode not in MODES:
            raise ValueError(f"wake-up mode {mode!r}: use one of {MODES}")
        self.db = db
        self.probe = probe
        self.mode = mode
        self.safety_net = safety_net
        self.poll_interval = poll_interval
        self.max_waiting = max_waiting
        self._lock = threading.Condition()
        self._waiters: dict[int, Waiter] = {}
        self._ids = itertools.count()
        self._due: list[tuple[float, str]] = []  # (epoch, type): a timer for jobs that come due later
        self._generation = 0  # moves on at every wake-up and every (re)connection of the listener
        self._empty: dict[_Key, int] = {}  # types -> generation at which a claim for them found nothing
        self._listening = False  # signals reach this process (the listener is connected, or bound)
        self._keys = 0  # moves on when keys or users change, and at every (dis)connection of the listener
        self._heard = 0.0  # when (monotonic) the PostgreSQL listener last heard a notification
        self._pid = 0  # the process whose threads run (a fork starts its own)
        self._stop = threading.Event()
        self._pool_lock = threading.Lock()  # held by the listener while it uses the pool (``_pool``)
        self._signal: _Signal | None = None
        self._next_probe = 0.0
        self.probes = 0  # how many safety-net probes this process ran (tests, the bench)

    # -- the one call for "jobs became claimable" -----------------------------------------------------

    def ready(self, types: Iterable[str] | None = None, *, due: float | None = None, count: int = 1) -> None:
        """Jobs of ``types`` (None: of any type) became claimable, after the commit of the transaction that
        made them so; ``due`` (a Unix time) when that is later than now; ``count`` how many per type.

        Wakes up to ``count`` waiting long polls per type in this process, and signals the other processes
        on SQLite. On PostgreSQL a row that becomes pending notifies by itself (the triggers of migrations
        0012 and 0014): a change that makes a pending job claimable without writing its ``status`` or
        ``available_at`` must write one of them (or call ``ready`` and accept the safety net's delay in the
        other processes)."""
        names = None if types is None else frozenset(types)
        if names is not None and not names:
            return
        if self.mode == "signal":
            if self.db.dialect == "postgresql":
                if self._listening:
                    return  # the trigger's notification comes back to this process too
            elif (signal := self._sqlite_signal()) is not None:
                signal.send(names, due)
        self._local(names, due, count)

    def _sqlite_signal(self) -> _Signal | None:
        """This process's SQLite signals (made on first use, and again after a fork); None for a memory
        database or a folder that cannot be made."""
        signal, pid = self._signal, os.getpid()
        if signal is not None and signal.pid == pid:
            return signal
        database = self.db.url.database
        if not database or database == ":memory:":
            return None
        with self._lock:
            if self._signal is None or self._signal.pid != pid:
                try:
                    self._signal = _Signal(database)
                except OSError as exc:
                    log.warning("no wake-up signals between processes (%s): polling instead", exc)
                    self.mode = "poll"
                    return None
            return self._signal

    def pass_on(self, types: list[str] | None) -> None:
        """A woken long poll took a full batch: wake the next waiter here, since there may be more."""
        self._local(None if types is None else frozenset(types), None)

    def _local(self, names: frozenset[str] | None, due: float | None, count: int = 1) -> None:
        with self._lock:
            if due is not None and due > time.time() + 0.001:
                for name in names or ("",):
                    if len(self._due) < MAX_TIMERS:  # beyond: the safety net finds them
                        heapq.heappush(self._due, (due, name))
                self._lock.notify_all()  # the timer may have to fire sooner
                return
            self._generation += 1
            if names is None:
                self._wake(None, count)
            else:
                for name in names:
                    self._wake(frozenset((name,)), count)

    def _wake(self, names: frozenset[str] | None, count: int) -> None:
        """Set the events of up to ``count`` waiters that want ``names``: sleeping ones first, then ones
        between two claims (their next wait then returns at once, so the wake-up is never lost)."""
        chosen = 0
        for sleeping in (True, False):
            for waiter in self._waiters.values():
                if chosen >= count:
                    return
                if waiter.sleeping == sleeping and not waiter.event.is_set() and waiter.wants(names):
                    waiter.woken_for = names
                    waiter.event.set()
                    chosen += 1

    # -- waiting --------------------------------------------------------------------------------------

    @contextmanager
    def waiting(self, types: list[str] | None) -> Iterator[Waiter]:
        """Register a waiting long poll for its whole life (raises ``WaitingPollsFull`` beyond
        ``max_waiting``). A wake-up that reaches it after its last claim is passed on when it leaves."""
        self._start()
        waiter = Waiter(tuple(sorted(set(types))) if types else None)
        with self._lock:
            if len(self._waiters) >= self.max_waiting:
                raise WaitingPollsFull()
            key = next(self._ids)
            self._waiters[key] = waiter
            self._lock.notify_all()  # the probe's thread sleeps while nobody waits
        try:
            yield waiter
        finally:
            with self._lock:
                del self._waiters[key]
                if waiter.event.is_set():  # woken after its last claim: someone else must look
                    self._wake(waiter.woken_for, 1)

    def generation(self) -> int:
        with self._lock:
            return self._generation

    def known_empty(self, types: _Key) -> bool:
        """Whether a claim for ``types`` found nothing and nothing has happened since, while signals
        reach this process: a new long poll then waits at once, without a query."""
        with self._lock:
            return self._listening and self._empty.get(types, -1) == self._generation

    def found_empty(self, types: _Key, generation: int) -> None:
        """A claim for ``types`` that began at ``generation`` found nothing."""
        with self._lock:
            if generation == self._generation:
                self._empty[types] = generation
                if len(self._empty) > 1000:  # many distinct type lists: forget them all
                    self._empty = {types: generation}

    def sleep(self, waiter: Waiter, seconds: float) -> bool:
        """Sleep until woken or ``seconds`` pass; True when woken (the event is then cleared)."""
        with self._lock:
            waiter.sleeping = True
        try:
            woken = waiter.event.wait(seconds)
        finally:
            with self._lock:
                waiter.sleeping = False
                if woken:
                    waiter.event.clear()
        return woken

    def keys_generation(self) -> int | None:
        """A number that moves on whenever API keys or users may have changed; None when this process
        cannot know (not PostgreSQL, poll mode, the listener away or lately deaf): then nothing is cached.
        The first call in a process starts its listener (the API's first key check)."""
        if self.db.dialect != "postgresql" or self.mode != "signal" or self._stop.is_set():
            return None
        self._start()
        with self._lock:
            if not self._listening:
                return None
            if time.monotonic() - self._heard > _QUIET_SECONDS + _DEAF_SECONDS:
                return None
            return self._keys

    def keys_changed(self) -> None:
        """Keys or users changed in this process (committed): forget now, without waiting for the
        notification."""
        with self._lock:
            self._keys += 1

    @property
    def waiting_count(self) -> int:
        with self._lock:
            return len(self._waiters)

    @property
    def listening(self) -> bool:
        with self._lock:
            return self._listening

    # -- the threads: the listener (signals) and the clock (due times, the safety net) ----------------

    def _start(self) -> None:
        pid = os.getpid()
        if self._pid == pid:
            return
        with self._lock:
            if self._pid == pid:
                return
            self._pid = pid
            self._listening = False
            self._waiters.clear()
            self._stop = threading.Event()
            stop = self._stop
            self._next_probe = time.monotonic() + self.poll_interval
        # The threads hold this object weakly: they end within a second or two of its last user (an app
        # of the test suite, say) letting go of it.
        ref = weakref.ref(self)
        if self.mode == "signal":
            if self.db.dialect == "postgresql":
                threading.Thread(
                    target=_listen_postgres, args=(ref, stop), name="queuelog-listen", daemon=True
                ).start()
            elif (signal := self._sqlite_signal()) is not None:
                try:
                    signal.bind()
                except OSError as exc:
                    log.warning("no wake-up signals between processes (%s): polling instead", exc)
                else:
                    with self._lock:
                        self._listening = True
                        self._generation += 1
                    threading.Thread(
                        target=_receive, args=(ref, signal, stop), name="queuelog-signals", daemon=True
                    ).start()
        threading.Thread(target=_clock, args=(ref, stop), name="queuelog-wakeups", daemon=True).start()

    def stop(self) -> None:
        """Stop this process's wake-up threads (tests; they are daemons otherwise). Once it returns, the
        listener no longer uses the database's pool: the pool may be disposed of."""
        self._stop.set()
        with self._pool_lock, self._lock:
            self._lock.notify_all()
            self._listening = False
            self._pid = 0

    @contextmanager
    def _pool(self, stop: threading.Event) -> Iterator[None]:
        """The listener's use of the pool (its own connection, the hellos): never once ``stop()`` ran."""
        with self._pool_lock:
            if stop.is_set():
                raise _Stopped()
            yield

    def _tick(self, stop: threading.Event) -> None:
        """One turn of the clock's thread, which waits at most ``_TURN`` seconds: fire the due times; probe
        the database every ``safety_net`` seconds (``poll_interval`` in poll mode) while anyone waits here,
        and never while nobody does."""
        with self._lock:
            if not self._waiters:
                self._lock.wait(_TURN)
                self._next_probe = time.monotonic() + self._probe_interval()
                return
            now = time.time()
            fired: list[str] = []
            while self._due and self._due[0][0] <= now + 0.001:
                fired.append(heapq.heappop(self._due)[1])
            if not fired:
                until_due = self._due[0][0] - now if self._due else float("inf")
                until_probe = self._next_probe - time.monotonic()
                if min(until_due, until_probe) > 0:
                    self._lock.wait(min(until_due, until_probe, _TURN))
                    return
        if fired:
            self._local(None if "" in fired else frozenset(fired), None)
            return
        self._next_probe = time.monotonic() + self._probe_interval()
        types = self._wanted()
        try:
            self.probes += 1
            if self.probe(types):
                self._local(None if types is None else frozenset(types), None)
        except Exception as exc:  # the database is away: try again next time
            log.debug("wake-up probe failed: %s", exc)

    def _probe_interval(self) -> float:
        return self.safety_net if self._listening else self.poll_interval

    def _wanted(self) -> list[str] | None:
        """The types this process's waiters want together (None: any)."""
        with self._lock:
            wanted: set[str] = set()
            for waiter in self._waiters.values():
                if waiter.types is None:
                    return None
                wanted.update(waiter.types)
            return sorted(wanted)

    def _connected(self) -> None:
        """The listener (re)connected: what was notified while it was away is found by claiming."""
        with self._lock:
            self._listening = True
            self._keys += 1
            self._heard = time.monotonic()
            self._next_probe = time.monotonic() + self.safety_net
            count = len(self._waiters) or 1
        self._local(None, None, count=count)

    def _disconnected(self) -> None:
        with self._lock:
            self._listening = False
            self._generation += 1
            self._keys += 1

    def _received(self, payload: str) -> None:
        """One signal: ``"<due epoch> <type>"`` (an empty type: any), ``KEYS_CHANGED``, or a ``HELLO``."""
        with self._lock:
            self._heard = time.monotonic()
            if payload == KEYS_CHANGED:
                self._keys += 1
                return
        if payload.startswith(HELLO):
            return
        due_text, _, name = payload.partition(" ")
        try:
            due = float(due_text)
        except ValueError:
            due = None
        self._local(frozenset((name,)) if name else None, due)


_SOCKETS = itertools.count()
_BOUND: set[str] = set()  # the sockets this process has bound (by name)


def _bound_here(name: str) -> bool:
    return name in _BOUND


_TURN = 2.0  # the longest a wake-up thread waits before it looks whether its ``Wakeups`` is still used
_HELLO_SECONDS = 3.0  # how long a new listener waits for its own first notification
_QUIET_SECONDS = 15.0  # a listener that heard nothing this long sends itself a notification ...
_DEAF_SECONDS = 5.0  # ... and reconnects when that has not come back this much later


class _Stopped(Exception):
    """``Wakeups.stop()`` ran: the listener ends."""


class _Deaf(Exception):
    """The listener's own notification did not come back: its connection is gone without a word."""


def _clock(ref: weakref.ref[Wakeups], stop: threading.Event) -> None:
    while not stop.is_set() and (hub := ref()) is not None:
        hub._tick(stop)
        del hub


def _listen_postgres(ref: weakref.ref[Wakeups], stop: threading.Event) -> None:
    """One connection of its own, outside the pool, that LISTENs; reconnects with growing pauses."""
    failures = 0
    while not stop.is_set() and (hub := ref()) is not None:
        conn: Any = None
        try:
            with hub._pool(stop):
                fairy = hub.db.engine.raw_connection()
                conn = fairy.driver_connection
                fairy.detach()
            conn.autocommit = True
            with conn.cursor() as cur:
                schema = cur.execute("SELECT current_schema()").fetchone()[0]
                cur.execute(f'LISTEN "{channel_name(schema)}"')
            # Does a notification from another connection reach this one? Not through PgBouncer in
            # transaction mode, where the LISTEN stays behind on a server connection that others use:
            # then say so, and poll.
            hello = f"{HELLO}{secrets.token_hex(8)}"
            with hub._pool(stop), hub.db.cursor(autocommit=True) as other:
                other.execute("SELECT pg_notify(%s, %s)", (channel_name(schema), hello))
            heard, deadline = False, time.monotonic() + _HELLO_SECONDS
            while not heard and (left := deadline - time.monotonic()) > 0:
                for note in conn.notifies(timeout=left, stop_after=1):
                    heard = heard or note.payload == hello
                    hub._received(note.payload)
            if not heard:
                log.warning(
                    "wake-up notifications do not reach this process (PgBouncer in transaction mode?):"
                    " probing every QUEUELOG_LONG_POLL_INTERVAL instead; set QUEUELOG_WAKEUPS=poll"
                    " (docs/operations.md#pgbouncer)"
                )
                return
            failures = 0
            hub._connected()
            del hub
            pinged = False
            while not stop.is_set():
                if (hub := ref()) is None:
                    return
                for note in conn.notifies(timeout=_TURN / 2):  # each as it comes
                    hub._received(note.payload)
                    pinged = False
                quiet = time.monotonic() - hub._heard
                if quiet > _QUIET_SECONDS + _DEAF_SECONDS:
                    raise _Deaf(f"its own notification did not come back within {_DEAF_SECONDS:g} s")
                if quiet > _QUIET_SECONDS and not pinged:
                    with hub._pool(stop), hub.db.cursor(autocommit=True) as other:
                        other.execute("SELECT pg_notify(%s, %s)", (channel_name(schema), f"{HELLO}again"))
                    pinged = True
                del hub
        except Exception as exc:
            if stop.is_set() or (hub := ref()) is None:
                return
            log.warning("wake-up listener lost its connection (%s); reconnecting", exc)
            hub._disconnected()
            del hub
            stop.wait(_RECONNECT_SECONDS[min(failures, len(_RECONNECT_SECONDS) - 1)])
            failures += 1
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass


def _receive(ref: weakref.ref[Wakeups], signal: _Signal, stop: threading.Event) -> None:
    sock = signal.sock
    assert sock is not None
    try:
        while not stop.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                data = b""
            if (hub := ref()) is None:
                return
            for line in data.decode("utf-8", "replace").splitlines():
                hub._received(line)
            del hub
    except OSError:
        pass
    finally:
        signal.unbind()


class _Signal:
    """SQLite's signals between the processes on one database file: each process binds a datagram socket
    in a private folder beside the file (in the temporary folder when that path would be too long for a
    socket), named by its process id; ``send`` writes one datagram to each of the others, and forgets the
    sockets of processes that are gone."""

    def __init__(self, database: str):
        folder = os.path.abspath(database) + ".wakeups"
        if len(folder) > 90:
            digest = hashlib.sha256(os.path.abspath(database).encode()).hexdigest()[:16]
            folder = os.path.join(tempfile.gettempdir(), f"queuelog-wakeups-{os.getuid()}-{digest}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        self.folder = folder
        self.pid = os.getpid()
        # By process id and a count: two queues of one process (tests, a command) signal each other too.
        self.path = os.path.join(folder, f"{self.pid}-{next(_SOCKETS)}.sock")
        self.sock: socket.socket | None = None
        self.out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.out.setblocking(False)
        weakref.finalize(self, self.out.close)
        self._peers: list[str] = []
        self._listed: float = -1.0

    def bind(self) -> None:
        """Receive signals from now on (a process with waiting long polls)."""
        if self.sock is not None:
            return
        for name in os.listdir(self.folder):  # left by a process that had this id before
            if name.startswith(f"{self.pid}-") and not _bound_here(name):
                try:
                    os.unlink(os.path.join(self.folder, name))
                except FileNotFoundError:
                    pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(self.path)
        _BOUND.add(os.path.basename(self.path))
        sock.settimeout(_TURN / 2)
        self.sock = sock

    def unbind(self) -> None:
        _BOUND.discard(os.path.basename(self.path))
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def _others(self) -> list[str]:
        mtime = os.stat(self.folder).st_mtime
        if mtime != self._listed:
            self._listed = mtime
            self._peers = [
                os.path.join(self.folder, name)
                for name in os.listdir(self.folder)
                if name.endswith(".sock") and os.path.join(self.folder, name) != self.path
            ]
        return self._peers

    def send(self, names: frozenset[str] | None, due: float | None) -> None:
        when = f"{due if due is not None else 0:.6f}"
        data = "\n".join(f"{when} {name}" for name in (names or ("",))).encode()
        for peer in self._others():
            try:
                self.out.sendto(data, peer)
            except OSError as exc:
                if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):  # its process is gone
                    try:
                        os.unlink(peer)
                    except OSError:
                        pass
                # EAGAIN: its queue is full of wake-ups it has yet to read; one more adds nothing
