"""The JSON API blueprint. It authenticates with API keys only, so it is exempt from CSRF."""

from werkzeug.routing import IntegerConverter

from queuelog.api import (  # noqa: F401 - their operations attach to bp
    batches,
    jobs,
    operations,
    schedules,
    types,
    workers,
)
from queuelog.api.base import bp


class JobIdConverter(IntegerConverter):
    """Job ids in URLs: ASCII digits only (``\\d`` would match "²"), at most 18 of them, so every match fits
    a 64-bit integer."""

    regex = r"[0-9]{1,18}"


__all__ = ["JobIdConverter", "bp"]
