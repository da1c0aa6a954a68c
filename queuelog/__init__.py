"""queuelog: a persistent background job queue with a JSON API and a web face.

``create_app`` lives in ``queuelog.factory``; it is loaded on first use so that ``queuelog.worker`` (which
runs on worker machines) does not import Flask or SQLAlchemy.
"""

from typing import Any

__all__ = ["bootstrap", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from queuelog import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'queuelog' has no attribute {name!r}")
