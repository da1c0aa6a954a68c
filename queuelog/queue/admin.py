"""The admin store: users, API keys and the audit log, and every change to them (docs/pages.md, docs/cli.md). The pages, the command line and the JSON API's key check all come here; none of them
holds a query of its own.

Each change and its audit row are one transaction: a change that is refused or fails half-way leaves
neither. Job types (types.py) and schedules (schedules.py) keep their own homes in the queue layer and
write their audit rows the same way, made by ``audit_row``; a bulk action on jobs has its rows written by
the engine in each batch's transaction (``BulkAudit``, queuelog/queue/console.py).

Refusals are codes with parameters (queuelog/access/refusals.py): "already exists", "the last active admin",
"no such user" ... each face words them.
"""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime, timedelta
from logging import Logger
from typing import TYPE_CHECKING, Any

from sqlalchemy import Update, case, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from queuelog.access.auth import hash_key, hash_password, key_digest, new_key, password_matches
from queuelog.access.refusals import AlreadyExists, AuthError, Refusal, check_password
from queuelog.db import Database
from queuelog.engines import Engine, KeyRow, engine_for
from queuelog.models import KEY_KINDS, ROLES, ApiKey, AuditLog, User, utcnow
from queuelog.queue.principal import Principal

if TYPE_CHECKING:
    from queuelog.queue.core import Queue
    from queuelog.queue.wakeups import Wakeups

# last_used_at is a convenience for admins, not an audit trail: writing it on every request would turn every
# read into a write, so it is kept to the minute: a key seen for the first time is written at once, the
# others a process has seen are written together, in one statement, at most once a minute per process.
LAST_USED_RESOLUTION = timedelta(seconds=60)
KEYS_KEPT = 10_000  # key checks a process remembers (beyond: it forgets them all and starts again)
AUDIT_PAGE = 200  # the audit log's page shows the newest rows, this many


def audit_row(
    actor: str, action: str, target: str, detail: str | None = None, *, at: datetime | None = None
) -> AuditLog:
    """The audit log's row of one admin change, to be added in the change's own transaction: ``actor``
    (a username, "cli" or "system") did ``action`` ("user.create", "type.pause" ...) to ``target``."""
    row = AuditLog(actor=actor, action=action, target=target, detail=detail)
    if at is not None:
        row.at = at
    return row


class AdminStore:
    """Users, API keys and the audit log of one app's database. Made once per app (``app.extensions``):
    the key check of every API request uses the same ``Database`` and engine. New passwords are hashed
    with the database's method (``Database.password_hash``, from QUEUELOG_PASSWORD_HASH).

    Given the process's ``wakeups`` on PostgreSQL, a key check is remembered while the listener hears that
    nothing changed: a change to any key or user notifies every process (migration 0013), and each
    forgets what it remembered (docs/operations.md#api-keys-and-who-may-do-what)."""

    def __init__(self, db: Database, *, engine: Engine | None = None, wakeups: Wakeups | None = None):
        self.db = db
        self.engine = engine if engine is not None else engine_for(db)
        self.wakeups = wakeups
        self._checked: dict[str, tuple[int, KeyRow]] = {}  # digest -> (keys generation, its row)
        self._stamps = _LastUsed()

    # -- the audit log --------------------------------------------------------------------------------

    def audit_log(self, limit: int = AUDIT_PAGE) -> list[AuditLog]:
        """The newest ``limit`` rows of the audit log, newest first."""
        with self.db.session() as session:
            return list(session.scalars(select(AuditLog).order_by(AuditLog.id.desc()).limit(limit)))

    # -- users ----------------------------------------------------------------------------------------

    def users(self, *, active_only: bool = False) -> list[User]:
        """Every user (or the active ones), by username."""
        statement = select(User).order_by(User.username)
        if active_only:
            statement = statement.where(User.active.is_(True))
        with self.db.session() as session:
            return list(session.scalars(statement))

    def user(self, user_id: int) -> User | None:
        with self.db.session() as session:
            return session.get(User, user_id)

    def user_named(self, username: str) -> User | None:
        with self.db.session() as session:
            return session.scalar(select(User).where(User.username == username))

    def login(self, username: str, password: str) -> User | None:
        """The active user ``username`` when ``password`` is theirs, else None (unknown, wrong password
        or deactivated: one answer, and as slow for an unknown name as for a known one)."""
        user = self.user_named(username)
        ok = password_matches(None if user is None else user.password_hash, password, self.db.password_hash)
        return user if ok and user is not None and user.active else None

    def create_user(self, username: str, role: str, password: str, *, actor: str = "cli") -> User:
        """Add a user; ``user.create`` in the audit log. Refused: ``BAD_ROLE``, ``BAD_USERNAME``, the
        password's rules, ``USER_EXISTS``."""
        _check_role(role)
        if not username or len(username) > 64 or not username.isprintable() or username != username.strip():
            raise AuthError(
                Refusal.BAD_USERNAME,
                "username must be 1 to 64 printable characters without surrounding spaces",
            )
        check_password(password)
        exists = AlreadyExists(Refusal.USER_EXISTS, f"user {username!r} already exists", name=username)
        password_hash = hash_password(password, self.db.password_hash)
        try:
            with self.db.session(write=True) as session, session.begin():
                if session.scalar(select(User.id).where(User.username == username)) is not None:
                    raise exists
                user = User(username=username, role=role, password_hash=password_hash)
                session.add(user)
                session.add(audit_row(actor, "user.create", username, f"role={role}"))
        except IntegrityError:
            if self.user_named(username) is None:
                raise  # not the name: another constraint refused the change
            raise exists from None  # made by someone else at the same moment
        return user

    def ensure_first_admin(self, password: str | None) -> str | None:
        """Make the ``admin`` user when there are no users; returns the password when one was generated."""
        with self.db.session() as session:
            if session.scalar(select(User.id).limit(1)) is not None:
                return None
        generated = None
        if not password:
            password = generated = secrets.token_urlsafe(12)
        try:
            self.create_user("admin", "admin", password, actor="system")
        except AlreadyExists:
            return None  # another process starting at the same time made it first
        return generated

    def update_user(
        self,
        username: str,
        *,
        actor: str,
        role: str | None = None,
        active: bool | None = None,
        password: str | None = None,
    ) -> User:
        """Change a user's role, active flag or password; ``user.update`` in the audit log with what
        changed. Refused: ``NO_SUCH_USER``, ``BAD_ROLE``, the password's rules, and ``LAST_ADMIN`` for a
        change that would leave no active admin.

        A new password, a deactivation or a new role ends every session of the user."""
        if role is not None:
            _check_role(role)
        password_hash = None
        if password is not None:
            check_password(password)
            password_hash = hash_password(password, self.db.password_hash)
        with self.db.session(write=True) as session, session.begin():
            user = session.scalar(select(User).where(User.username == username))
            if user is None:
                raise AuthError(Refusal.NO_SUCH_USER, f"no user {username!r}", name=username)
            ends_sessions = (
                password is not None or active is False or (role is not None and role != user.role)
            )
            if role is not None:
                user.role = role
            if active is not None:
                user.active = active
            if password_hash is not None:
                user.password_hash = password_hash
            if ends_sessions:
                user.session_version = User.session_version + 1
            session.flush()
            session.refresh(user)  # the new session_version, for callers that keep the user logged in
            admins = session.scalar(
                select(func.count()).select_from(User).where(User.role == "admin", User.active.is_(True))
            )
            if not admins:
                raise AuthError(Refusal.LAST_ADMIN, "there must be at least one active admin")
            changes = ", ".join(
                f"{k}={v}"
                for k, v in (("role", role), ("active", active), ("password", password and "reset"))
                if v is not None
            )
            session.add(audit_row(actor, "user.update", username, changes))
        self._forget()
        return user

    def end_sessions(self, user_id: int) -> None:
        """End every session of a user (logout ends them all, on every device)."""
        with self.db.session(write=True) as session, session.begin():
            session.execute(
                update(User).where(User.id == user_id).values(session_version=User.session_version + 1)
            )

    def set_preferences(
        self, user_id: int, *, locale: str | None = None, timezone: str | None = None
    ) -> None:
        """The language and time zone a user chose in the pages (no audit row: they are the user's own)."""
        values: dict[str, Any] = {}
        if locale is not None:
            values["locale"] = locale
        if timezone is not None:
            values["timezone"] = timezone
        if values:
            with self.db.session(write=True) as session, session.begin():
                session.execute(update(User).where(User.id == user_id).values(**values))

    # -- API keys -------------------------------------------------------------------------------------

    def keys(self, *, newest_first: bool = False) -> list[tuple[ApiKey, str | None]]:
        """Every key, revoked ones too, with the username of a producer key's user (None for a worker
        key), oldest first (or newest first)."""
        order = (
            (ApiKey.created_at.desc(), ApiKey.id.desc()) if newest_first else (ApiKey.created_at, ApiKey.id)
        )
        statement = select(ApiKey, User.username).outerjoin(User, User.id == ApiKey.user_id).order_by(*order)
        with self.db.session() as session:
            return [(key, username) for key, username in session.execute(statement)]

    def worker_key_in_use(self, name: str) -> bool:
        """Whether ``name`` is the name of an unrevoked worker key."""
        statement = select(ApiKey.id).where(
            ApiKey.name == name, ApiKey.kind == "worker", ApiKey.revoked_at.is_(None)
        )
        with self.db.session() as session:
            return session.scalar(statement.limit(1)) is not None

    def create_key(self, name: str, kind: str, *, username: str | None = None, actor: str = "cli") -> str:
        """Make an API key and return it; only its hash is kept, so this is the one time it is seen;
        ``key.create`` in the audit log. Refused: ``BAD_KIND``, ``BAD_KEY_NAME``, ``KEY_EXISTS``,
        ``PRODUCER_KEY_NEEDS_USER``, ``NO_SUCH_USER``, ``WORKER_KEY_HAS_USER``.

        The name may be that of a revoked key (whose row stays), never that of a key in use."""
        if kind not in KEY_KINDS:
            raise AuthError(Refusal.BAD_KIND, f"kind must be one of {', '.join(KEY_KINDS)}")
        if not name or len(name) > 64 or not name.isprintable():
            raise AuthError(Refusal.BAD_KEY_NAME, "name must be 1 to 64 printable characters")
        raw = new_key()
        exists = AlreadyExists(Refusal.KEY_EXISTS, f"a key named {name!r} already exists", name=name)
        try:
            with self.db.session(write=True) as session, session.begin():
                if _key_in_use(session, name):
                    raise exists
                user_id = None
                if kind == "producer":
                    if not username:
                        raise AuthError(Refusal.PRODUCER_KEY_NEEDS_USER, "a producer key belongs to a user")
                    user_id = session.scalar(select(User.id).where(User.username == username))
                    if user_id is None:
                        raise AuthError(Refusal.NO_SUCH_USER, f"no user {username!r}", name=username)
                elif username:
                    raise AuthError(Refusal.WORKER_KEY_HAS_USER, "a worker key belongs to no user")
                session.add(
                    ApiKey(
                        name=name,
                        kind=kind,
                        user_id=user_id,
                        key_hash=hash_key(raw),
                        prefix=raw[:8],
                        created_by=actor,
                    )
                )
                session.add(audit_row(actor, "key.create", name, f"kind={kind}"))
        except IntegrityError:
            with self.db.session() as session:
                if not _key_in_use(session, name):
                    raise  # not the name: another constraint refused the change
            raise exists from None  # made by someone else at the same moment
        return raw

    def revoke_key(self, name: str, *, actor: str = "cli") -> None:
        """Revoke the key in use under ``name`` at once; ``key.revoke`` in the audit log. Revoking a name
        whose keys are all revoked changes nothing; a name no key ever had is ``NO_SUCH_KEY``."""
        with self.db.session(write=True) as session, session.begin():
            key = session.scalar(select(ApiKey).where(ApiKey.name == name, ApiKey.revoked_at.is_(None)))
            if key is not None:
                key.revoked_at = utcnow()
                session.add(audit_row(actor, "key.revoke", name))
            elif session.scalar(select(ApiKey.id).where(ApiKey.name == name).limit(1)) is None:
                raise AuthError(Refusal.NO_SUCH_KEY, f"no key named {name!r}", name=name)
        self._forget()

    def authenticate(self, raw: str) -> Principal | None:
        """The principal behind an API key, or None for an unknown, revoked or orphaned key, or a key of
        an inactive user.

        The key's row is read from the database unless this process remembers it under the current keys
        generation (``Wakeups.keys_generation``: PostgreSQL, the listener connected and lately heard).
        A revocation or a user's change in this process holds from its next request; in the others, from
        the moment its notification arrives (as long as a notification takes, about a millisecond)."""
        digest = key_digest(raw)
        if digest is None:
            return None
        generation = self.wakeups.keys_generation() if self.wakeups is not None else None
        remembered = self._checked.get(digest) if generation is not None else None
        if remembered is not None and remembered[0] == generation:
            row = remembered[1]
        else:
            found = self.engine.api_key(digest)  # the generation was taken before: a change since forgets it
            if found is None:
                return None
            row = found
            if generation is not None:
                if len(self._checked) >= KEYS_KEPT:
                    self._checked.clear()
                self._checked[digest] = (generation, row)
        if row.kind == "worker":
            principal = Principal("worker", row.name)
        elif row.username is not None and row.active:
            principal = Principal("user", row.username, row.role)
        else:
            return None
        if due := self._stamps.due(row):
            try:
                with self.db.session(write=True) as session, session.begin():
                    session.execute(_last_used_update(due))
            except Exception:
                self._stamps.failed(due)
                raise
            self._stamps.written(due)
        return principal

    def _forget(self) -> None:
        """A key or a user changed in this process (committed): no remembered check survives it."""
        if self.wakeups is not None:
            self.wakeups.keys_changed()
        self._checked.clear()


def _last_used_update(uses: dict[int, datetime]) -> Update:
    """One statement that records each key's own last use, and only forward (another process may have
    written a later one)."""
    stamp = ApiKey.last_used_at.type  # each time bound as the column binds it (SQLite keeps text)
    used_at = case({key_id: literal(at, stamp) for key_id, at in uses.items()}, value=ApiKey.id)
    return (
        update(ApiKey)
        .where(ApiKey.id.in_(list(uses)), or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < used_at))
        .values(last_used_at=used_at)
    )


class _LastUsed:
    """When each key was last used, as one process writes it (``LAST_USED_RESOLUTION``): a key never
    written at once, the others with each one's own time, together, once a minute. A use still waiting
    when the process stops serving is not written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: dict[int, datetime] = {}  # key id -> the last_used_at this process wrote
        self._pending: dict[int, datetime] = {}  # key id -> its latest use since, waiting for the next write
        self._wrote = datetime.min.replace(tzinfo=UTC)

    def due(self, row: KeyRow) -> dict[int, datetime]:
        """The uses to be written now (none, usually): ``row``'s when it was never written and, once a
        minute, each key's latest use since its last write was more than a minute old."""
        now = utcnow()
        with self._lock:
            last = max(filter(None, (row.last_used_at, self._written.get(row.id))), default=None)
            if last is not None and now - last < LAST_USED_RESOLUTION:
                return {}
            self._pending[row.id] = now
            if last is not None and now - self._wrote < LAST_USED_RESOLUTION:
                return {}
            due, self._pending, self._wrote = self._pending, {}, now
            return due

    def written(self, uses: dict[int, datetime]) -> None:
        """``uses`` are in the database."""
        with self._lock:
            if len(self._written) >= KEYS_KEPT:
                self._written.clear()
            self._written.update(uses)

    def failed(self, uses: dict[int, datetime]) -> None:
        """Writing ``uses`` failed: they wait for the next write, with any later use kept."""
        with self._lock:
            for key_id, at in uses.items():
                self._pending[key_id] = max(at, self._pending.get(key_id, at))


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise AuthError(Refusal.BAD_ROLE, f"role must be one of {', '.join(ROLES)}", roles=", ".join(ROLES))


def _key_in_use(session: Session, name: str) -> bool:
    statement = select(ApiKey.id).where(ApiKey.name == name, ApiKey.revoked_at.is_(None)).limit(1)
    return session.scalar(statement) is not None


def first_start(
    queue: Queue, admin: AdminStore, job_types: str, admin_password: str | None, log: Logger
) -> None:
    """First start of a new database: the job type allowlist (``QUEUELOG_JOB_TYPES``), and the first admin,
    whose generated password goes to ``log`` once. The app's start and ``flask db upgrade`` call it."""
    queue.types.seed(job_types)
    generated = admin.ensure_first_admin(admin_password)
    if generated:
        log.warning(
            "created the first admin: username 'admin', password %r (shown once; change it)", generated
        )
