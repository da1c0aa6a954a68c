"""Users and API keys; who they are as a ``Principal`` (queuelog/principal.py says what each may do)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from queuelog.db import Database
from queuelog.engines import engine_for
from queuelog.models import KEY_KINDS, ROLES, ApiKey, AuditLog, User, utcnow
from queuelog.principal import Principal
from queuelog.refusals import AlreadyExists, AuthError, Refusal, check_password

KEY_PREFIX = "ql_"
# last_used_at is a convenience for admins, not an audit trail: writing it on every request would turn every
# read into a write, so it is refreshed at most once a minute per key.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def authenticate_key(db: Database, raw: str) -> Principal | None:
    """The principal behind an API key, or None for an unknown, revoked or orphaned key."""
    if not raw.startswith(KEY_PREFIX) or len(raw) > 128:
        return None
    digest = hash_key(raw)
    row = engine_for(db).api_key(digest)
    if row is None:
        return None
    key_id, kind, name, last_used, username, role, active = row
    if kind == "worker":
        principal = Principal("worker", name)
    elif username is not None and active:
        principal = Principal("user", username, role)
    else:
        return None
    _touch(db, key_id, last_used)
    return principal


def _touch(db: Database, key_id: int, last_used) -> None:
    now = utcnow()
    if last_used is not None and now - db.parse_time(last_used) < LAST_USED_RESOLUTION:
        return
    with db.session(write=True) as session, session.begin():
        key = session.get(ApiKey, key_id)
        if key is not None:
            key.last_used_at = now


def audit(db: Database, actor: str, action: str, target: str, detail: str | None = None) -> None:
    """Record an admin action that is not a job transition."""
    with db.session(write=True) as session, session.begin():
        session.add(AuditLog(actor=actor, action=action, target=target, detail=detail))


# -- management (admins: CLI and pages) ------------------------------------------------------------


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise AuthError(Refusal.BAD_ROLE, f"role must be one of {', '.join(ROLES)}", roles=", ".join(ROLES))


def create_user(db: Database, username: str, role: str, password: str, *, actor: str = "cli") -> User:
    _check_role(role)
    if not username or len(username) > 64 or not username.isprintable() or username != username.strip():
        raise AuthError(
            Refusal.BAD_USERNAME, "username must be 1 to 64 printable characters without surrounding spaces"
        )
    check_password(password)
    exists = AlreadyExists(Refusal.USER_EXISTS, f"user {username!r} already exists", name=username)
    try:
        with db.session(write=True) as session, session.begin():
            if session.scalar(select(User.id).where(User.username == username)) is not None:
                raise exists
            user = User(username=username, role=role)
            user.set_password(password, db.password_hash)
            session.add(user)
            session.add(AuditLog(actor=actor, action="user.create", target=username, detail=f"role={role}"))
    except IntegrityError:
        raise exists from None  # made by someone else at the same moment
    return user


def create_key(db: Database, name: str, kind: str, *, username: str | None = None, actor: str = "cli") -> str:
    """Make an API key and return it; only its hash is kept, so this is the one time it is seen.

    The name may be that of a revoked key (whose row stays), never that of a key in use."""
    if kind not in KEY_KINDS:
        raise AuthError(Refusal.BAD_KIND, f"kind must be one of {', '.join(KEY_KINDS)}")
    if not name or len(name) > 64 or not name.isprintable():
        raise AuthError(Refusal.BAD_KEY_NAME, "name must be 1 to 64 printable characters")
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    exists = AlreadyExists(Refusal.KEY_EXISTS, f"a key named {name!r} already exists", name=name)
    try:
        with db.session(write=True) as session, session.begin():
            if session.scalar(select(ApiKey.id).where(ApiKey.name == name, ApiKey.revoked_at.is_(None))):
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
            session.add(AuditLog(actor=actor, action="key.create", target=name, detail=f"kind={kind}"))
    except IntegrityError:
        raise exists from None  # made by someone else at the same moment
    return raw


def revoke_key(db: Database, name: str, *, actor: str = "cli") -> None:
    """Revoke the key in use under ``name``; revoking a name whose keys are all revoked changes nothing."""
    with db.session(write=True) as session, session.begin():
        key = session.scalar(select(ApiKey).where(ApiKey.name == name, ApiKey.revoked_at.is_(None)))
        if key is not None:
            key.revoked_at = utcnow()
            session.add(AuditLog(actor=actor, action="key.revoke", target=name))
        elif session.scalar(select(ApiKey.id).where(ApiKey.name == name).limit(1)) is None:
            raise AuthError(Refusal.NO_SUCH_KEY, f"no key named {name!r}", name=name)


def ensure_first_admin(db: Database, password: str | None) -> str | None:
    """Make the ``admin`` user when there are no users; returns the password when one was generated."""
    with db.session() as session:
        if session.scalar(select(User.id).limit(1)) is not None:
            return None
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    try:
        create_user(db, "admin", "admin", password, actor="system")
    except AlreadyExists:
        return None  # another process starting at the same time made it first
    return generated


def update_user(
    db: Database,
    username: str,
    *,
    actor: str,
    role: str | None = None,
    active: bool | None = None,
    password: str | None = None,
) -> User:
    """Change a user's role, active flag or password; refuses to leave the system without an active admin.

    A new password, a deactivation or a new role ends every session of the user."""
    if role is not None:
        _check_role(role)
    if password is not None:
        check_password(password)
    with db.session(write=True) as session, session.begin():
        user = session.scalar(select(User).where(User.username == username))
        if user is None:
            raise AuthError(Refusal.NO_SUCH_USER, f"no user {username!r}", name=username)
        ends_sessions = password is not None or active is False or (role is not None and role != user.role)
        if role is not None:
            user.role = role
        if active is not None:
            user.active = active
        if password is not None:
            user.set_password(password, db.password_hash)
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
        session.add(AuditLog(actor=actor, action="user.update", target=username, detail=changes))
    return user


def end_sessions(db: Database, user_id: int) -> None:
    """End every session of a user (logout ends them all, on every device)."""
    with db.session(write=True) as session, session.begin():
        session.execute(
            update(User).where(User.id == user_id).values(session_version=User.session_version + 1)
        )


def set_preferences(
    db: Database, user_id: int, *, locale: str | None = None, timezone: str | None = None
) -> None:
    with db.session(write=True) as session, session.begin():
        user = session.get(User, user_id)
        if user is not None:
            if locale is not None:
                user.locale = locale
            if timezone is not None:
                user.timezone = timezone
