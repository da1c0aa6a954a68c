"""Refusals about users, passwords and keys, worded for the pages in the page's language.

The queue's management functions raise ``AuthError`` with a code (``queuelog.refusals``); the pages show
the translation for that code, never the exception's English text.
"""

from __future__ import annotations

from flask_babel import LazyString
from flask_babel import lazy_gettext as _l

from queuelog.refusals import PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, AuthError, Refusal

_MESSAGES: dict[Refusal, LazyString] = {
    Refusal.BAD_ROLE: _l("Choose a role: admin or producer."),
    Refusal.BAD_USERNAME: _l("Use 1 to 64 printable characters, without spaces at either end."),
    Refusal.USER_EXISTS: _l("A user named %(name)s exists."),
    Refusal.NO_SUCH_USER: _l("There is no user named %(name)s."),
    Refusal.LAST_ADMIN: _l("There must be at least one active admin."),
    Refusal.PASSWORD_TOO_SHORT: _l("A password needs at least %(min)d characters."),
    Refusal.PASSWORD_TOO_LONG: _l("Use at most %(max)d characters."),
    Refusal.PASSWORD_BLANK: _l("A password cannot be only spaces."),
    Refusal.BAD_KIND: _l("Choose a kind: worker or producer."),
    Refusal.BAD_KEY_NAME: _l("Use 1 to 64 printable characters."),
    Refusal.KEY_EXISTS: _l("A key named %(name)s is in use. Revoke it first, or choose another name."),
    Refusal.NO_SUCH_KEY: _l("There is no key named %(name)s."),
    Refusal.PRODUCER_KEY_NEEDS_USER: _l("A producer key acts for a user: choose one."),
    Refusal.WORKER_KEY_HAS_USER: _l("A worker key acts for no user: leave the user empty."),
}
_LIMITS = {"min": PASSWORD_MIN_LENGTH, "max": PASSWORD_MAX_LENGTH}


def refusal_text(exc: AuthError) -> str:
    """The refusal in the page's language."""
    message = _MESSAGES.get(exc.code)
    if message is None:  # a code without a page wording yet: say something true rather than English
        return str(_l("That could not be done."))
    return str(message) % {**_LIMITS, **exc.params}


# Which form field a refusal belongs beside.
PASSWORD_REFUSALS = frozenset({Refusal.PASSWORD_TOO_SHORT, Refusal.PASSWORD_TOO_LONG, Refusal.PASSWORD_BLANK})
KEY_USER_REFUSALS = frozenset(
    {Refusal.PRODUCER_KEY_NEEDS_USER, Refusal.WORKER_KEY_HAS_USER, Refusal.NO_SUCH_USER}
)
