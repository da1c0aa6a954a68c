"""``queuelog-worker``: run the handlers of a module against a queuelog server."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from queuelog.worker.client import QueueClient
from queuelog.worker.runner import Worker


def load_handlers(module_name: str) -> dict[str, Callable[..., Any]]:
    """The module's functions marked with ``@handles(type)``, plus any ``HANDLERS = {type: function}``."""
    sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    handlers = dict(getattr(module, "HANDLERS", {}))
    for value in vars(module).values():
        job_type = getattr(value, "__queuelog_type__", None)
        if job_type and callable(value):
            handlers[job_type] = value
    if not handlers:
        raise SystemExit(f"{module_name}: no handlers (mark functions with @queuelog.worker.handles('type'))")
    return handlers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="queuelog-worker", description=__doc__)
    parser.add_argument(
        "--url",
        default=os.environ.get("QUEUELOG_URL", "http://127.0.0.1:5000"),
        help="the server (default $QUEUELOG_URL or http://127.0.0.1:5000)",
    )
    parser.add_argument(
        "--key",
        default=os.environ.get("QUEUELOG_WORKER_KEY"),
        help="a worker key (default $QUEUELOG_WORKER_KEY; prefer the variable: arguments show in ps)",
    )
    parser.add_argument(
        "--handlers", required=True, help="module with the handlers, e.g. queuelog.worker.demo"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="jobs run at once (default 4)")
    parser.add_argument("--types", help="only these job types, comma-separated (default: every handled type)")
    parser.add_argument(
        "--lease-seconds", type=int, default=60, help="lease per claim; heartbeats every third"
    )
    parser.add_argument("--wait-seconds", type=float, default=10, help="long-poll wait per claim (0..20)")
    parser.add_argument(
        "--grace-period", type=float, default=30, help="seconds to finish held jobs on SIGTERM"
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not args.key:
        parser.error("no worker key: set QUEUELOG_WORKER_KEY or pass --key")
    handlers = load_handlers(args.handlers)
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    worker = Worker(
        QueueClient(args.url, args.key),
        handlers,
        concurrency=args.concurrency,
        types=types,
        lease_seconds=args.lease_seconds,
        wait_seconds=args.wait_seconds,
        grace_period=args.grace_period,
    )
    worker.install_signal_handlers()
    status = worker.run()
    if worker.held:
        # The grace period ended with handlers still running: exit now rather than wait for them (the
        # interpreter would join their threads); their jobs are retried once their leases expire.
        logging.shutdown()
        os._exit(status)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
