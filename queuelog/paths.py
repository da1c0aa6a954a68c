"""Where queuelog finds the files it ships, and where it keeps its own (the instance folder).

An installed queuelog (a wheel) holds its templates, stylesheet and compiled translations inside the
package: ``queuelog/templates``, ``queuelog/static``. A checkout (run in place, or installed with
``pip install -e``) keeps them at the top of the repository: ``templates/``, ``static/``, and reads its
translations from their ``.po`` files, in memory (``queuelog/i18n.py``; docs/development.md#what-the-wheel-holds).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PACKAGE = Path(__file__).resolve().parent


def _shipped(name: str) -> Path:
    """``queuelog/<name>`` in a wheel, else ``<name>/`` at the top of the checkout."""
    inside = PACKAGE / name
    return inside if inside.is_dir() else PACKAGE.parent / name


TEMPLATES = _shipped("templates")
STATIC = _shipped("static")
TRANSLATIONS = PACKAGE / "translations"


def instance_path() -> str:
    """The instance folder (database, secret key): ``QUEUELOG_INSTANCE_PATH``, else ``./instance`` in the
    current working directory, whether queuelog runs from a checkout or from an installed package, so that
    the default database URL ``sqlite:///instance/queuelog.sqlite3`` names a file in it."""
    return os.path.abspath(os.environ.get("QUEUELOG_INSTANCE_PATH") or "instance")


def make_private_folder(folder: Path) -> None:
    """Create ``folder`` (and its parents) if it is missing, readable by this user alone (0700), as the
    instance folder is: it holds the database and the secret key. An existing folder is left as it is,
    with a warning when others may read it (``chmod 700`` it)."""
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif folder.stat().st_mode & 0o077:
        log.warning(
            "%s may be read by other users: chmod 700 it (it holds the database and secret key)", folder
        )
