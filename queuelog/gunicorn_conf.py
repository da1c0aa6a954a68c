"""gunicorn settings for queuelog, inside the package so that an installed wheel has them too:
`gunicorn -c python:queuelog.gunicorn_conf 'queuelog:create_app()'` (a checkout's `gunicorn.conf.py` reads
them from here). docs/operations.md#deployment-with-gunicorn-and-postgresql.

Each value can be overridden on the command line or through the environment variables named below.
"""

import logging
import multiprocessing
import os
import shutil
import tempfile

from queuelog.config import Integer, check_environment, read_settings
from queuelog.gunicorn_worker import WORKER_CLASS

# The master checks the app's settings before it forks a worker: a bad value stops it with one line
# (a worker that exits is only started again), and an unknown QUEUELOG_* name is warned about once (the
# workers inherit that it was). docs/configuration.md, "Settings".
check_environment(logging.getLogger("queuelog.config").warning)


def _count(variable: str, default: int) -> int:
    """One of gunicorn's counts from the environment: a whole number of at least 1, or start-up stops."""
    raw = os.environ.get(variable) or str(default)
    try:
        return Integer(1)(raw)
    except ValueError:
        raise SystemExit(f"queuelog: {variable}={raw!r} is not valid: {Integer(1).accepts}") from None


bind = os.environ.get("QUEUELOG_BIND", "127.0.0.1:8000")
# gthread: each worker process serves several requests at once, and keep-alive connections are kept (the
# sync worker closes them). A waiting long poll (up to 20 s) sleeps in a thread of its own, holding no
# database connection and running no query (queuelog/queue/wakeups.py): each process has
# QUEUELOG_MAX_WAITING_POLLS threads for them on top of QUEUELOG_THREADS for every other request, so that
# waiting workers never take a page's or an API call's thread (docs/operations.md#wake-ups). Beyond that
# many, a claim that finds nothing answers at once with Retry-After. queuelog's gthread spreads new
# connections evenly over the processes (queuelog/gunicorn_worker.py says why).
worker_class = WORKER_CLASS
workers = _count("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count()))
threads = (
    _count("QUEUELOG_THREADS", 8) + read_settings()["MAX_WAITING_POLLS"]
)  # DB_POOL_SIZE >= QUEUELOG_THREADS
worker_connections = max(1000, threads + 100)  # connections a process keeps open: a thread each, and more
timeout = 60  # above the longest long poll (20 s)
graceful_timeout = 30
keepalive = 15
accesslog = os.environ.get("QUEUELOG_ACCESS_LOG")  # "-" for stdout; unset: no access log
errorlog = "-"

# Prometheus counters from every worker process are added up at scrape time (see queuelog/metrics.py):
# each process writes them to files in this folder, which must exist before the workers start.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="queuelog-metrics-")
    _made_metrics_dir = True
else:
    _made_metrics_dir = False


def on_starting(server):
    """Start from zero: files left by an earlier run of the server would be counted again."""
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".db"):
            os.unlink(os.path.join(folder, name))


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _made_metrics_dir:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


__all__ = [  # what gunicorn reads, and what `from queuelog.gunicorn_conf import *` gives gunicorn.conf.py
    "bind",
    "worker_class",
    "workers",
    "threads",
    "worker_connections",
    "timeout",
    "graceful_timeout",
    "keepalive",
    "accesslog",
    "errorlog",
    "on_starting",
    "child_exit",
    "on_exit",
]
