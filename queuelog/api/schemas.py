"""Where the jobs' request shapes were declared before they moved beside their operations (``jobs.py``,
``workers.py``); kept so that imports of these names still work."""

from queuelog.api.jobs import BATCH_BODY, JOB_BODY, LIST_QUERY
from queuelog.api.registry import EMPTY_BODY

__all__ = ["BATCH_BODY", "EMPTY_BODY", "JOB_BODY", "LIST_QUERY"]
