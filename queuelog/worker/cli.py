"""The queuelog-worker command: run the handlers of a module against a queuelog server."""

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

DEFAULT_URL = "http://127.0.0.1:5000"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

DESCRIPTION = (
    "Run the job handlers of a Python module against a queuelog server: claim jobs over HTTP, run them "
    "on a pool of threads, and report their results and failures."
)
EPILOG = (
    "The worker key comes from QUEUELOG_WORKER_KEY. The log goes to standard error: start-up, each "
    "finished job (id, type, outcome, run time in ms) and shutdown at INFO; a failing handler's traceback "
    "at WARNING when the job will be retried, at ERROR when it will not. On SIGTERM or SIGINT the worker "
    "stops claiming within about a second, lets running handlers finish within the grace period, reports "
    "them and exits 0; a second signal exits at once with status 1. When the server refuses a claim (401: "
    "the key is unknown or revoked; 403: not a worker key) the worker logs why at ERROR, stops the same way "
    "and exits 1."
)


def load_handlers(module_name: str) -> dict[str, Callable[..., Any]]:
    """The module's functions marked with @handles(type), plus any HANDLERS = {type: function}."""
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):  # the module itself, not one it imports
            raise SystemExit(
                f"queuelog-worker: no module named {module_name!r} (is it on PYTHONPATH?)"
            ) from None
        raise
    handlers = dict(getattr(module, "HANDLERS", {}))
    for value in vars(module).values():
        job_type = getattr(value, "__queuelog_type__", None)
        if job_type and callable(value):
            handlers[job_type] = value
    if not handlers:
        raise SystemExit(f"{module_name}: no handlers (mark functions with @queuelog.worker.handles('type'))")
    return handlers


def _number(kind: type, low: float, high: float) -> Callable[[str], Any]:
    """An argparse type: a number of ``kind`` from ``low`` to ``high``."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The command line; every option's help says its default."""
    parser = argparse.ArgumentParser(prog="queuelog-worker", description=DESCRIPTION, epilog=EPILOG)
    add = parser.add_argument
    add("--url", help=f"the server's base URL (default: $QUEUELOG_URL, else {DEFAULT_URL})")
    add(
        "--key",
        help="a worker key (default: $QUEUELOG_WORKER_KEY; prefer the variable: arguments show in ps)",
    )
    add(
        "--handlers",
        required=True,
        metavar="MODULE",
        help="the module with the handlers, e.g. queuelog.worker.demo (required, no default)",
    )
    add(
        "--concurrency",
        type=_number(int, 1, 100),
        default=4,
        metavar="N",
        help="jobs run at once, 1..100 (default: %(default)s)",
    )
    add(
        "--types",
        metavar="TYPE,...",
        help="claim only these job types, comma-separated (default: every type the module handles)",
    )
    add(
        "--lease-seconds",
        type=_number(int, 5, 43200),
        default=60,
        metavar="S",
        help="lease asked for per claim, 5..43200; held jobs are heartbeated every third of it "
        "(default: %(default)s)",
    )
    add(
        "--wait-seconds",
        type=_number(float, 0, 20),
        default=10,
        metavar="S",
        help="long-poll wait for work, 0..20; asked for in requests of at most 1 s each, so that a stop "
        "takes effect within about a second (default: %(default)s)",
    )
    add(
        "--grace-period",
        type=_number(float, 0, 86400),
        default=30,
        metavar="S",
        help="seconds running handlers get to finish and report after SIGTERM or SIGINT "
        "(default: %(default)s)",
    )
    add(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        help="the least severe messages logged, in any case: INFO logs start-up, every finished job and "
        "shutdown; WARNING and ERROR only problems, failing handlers with their tracebacks; DEBUG adds "
        "each claim (default: %(default)s)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, load the handlers and work until stopped; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, stream=sys.stderr)
    key = args.key or os.environ.get("QUEUELOG_WORKER_KEY")
    if not key:
        parser.error("no worker key: set QUEUELOG_WORKER_KEY or pass --key")
    url = args.url or os.environ.get("QUEUELOG_URL") or DEFAULT_URL
    try:
        client = QueueClient(url, key)
    except ValueError as exc:
        parser.error(str(exc))
    handlers = load_handlers(args.handlers)
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    worker = Worker(
        client,
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
