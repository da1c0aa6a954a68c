"""gunicorn settings for queuelog: `gunicorn -c gunicorn.conf.py 'queuelog:create_app()'`.

Each value can be overridden on the command line or through the environment variables named below.
"""

import multiprocessing
import os

bind = os.environ.get("QUEUELOG_BIND", "127.0.0.1:8000")
# gthread: each worker process serves several requests at once, so a long poll (up to 20 s) waits in one
# thread while the others keep answering, and keep-alive connections are kept (the sync worker closes them).
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", min(4, multiprocessing.cpu_count())))
threads = int(os.environ.get("QUEUELOG_THREADS", "8"))  # keep QUEUELOG_DB_POOL_SIZE >= threads
timeout = 60  # above the longest long poll (20 s)
graceful_timeout = 30
keepalive = 15
accesslog = os.environ.get("QUEUELOG_ACCESS_LOG")  # "-" for stdout; unset: no access log
errorlog = "-"
