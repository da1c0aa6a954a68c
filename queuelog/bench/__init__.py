"""``queuelog-bench``: how fast queuelog is next to the raw database and the web stack, on this machine.

Every scenario runs on fresh SQLite files and, with ``--postgres-url``, also in fresh schemas on that
PostgreSQL server (dropped afterwards). Figures are for comparing within one run: absolute numbers drift
on a shared machine, ratios much less.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

try:
    from queuelog.bench.core import scenario_backlog, scenario_core
    from queuelog.bench.minimal import use_clock
    from queuelog.bench.targets import Target
    from queuelog.gunicorn_worker import WORKER_CLASS
except ModuleNotFoundError as exc:  # the bare install is the worker client alone
    raise SystemExit(f"queuelog-bench runs the server: pip install 'queuelog[server]' ({exc})") from exc


def _table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        head = f"{row['scenario']:<8} {row['engine']:<10} {row['operation']:<44}"
        if row["scenario"] == "core":
            lines.append(
                f"{head} queuelog {row['queuelog_per_s']:>9,.0f}/s  raw {row['raw_per_s']:>9,.0f}/s"
                f"  ratio {row['ratio']:.2f}x  minimal {row['minimal_per_s']:>9,.0f}/s"
                f"  ratio {row['ratio_minimal']:.2f}x"
            )
        elif row["scenario"] == "flow":
            lines.append(
                f"{head} no limits {row['unlimited_per_s']:>9,.0f}/s  limited {row['limited_per_s']:>9,.0f}/s"
                f"  ratio {row['ratio']:.2f}x"
            )
        elif row["scenario"] == "price":
            lines.append(
                f"{head} "
                + "  ".join(
                    f"{key[: -len('_per_s')]} {rate:>9,.0f}/s ({row[key[: -len('_per_s')] + '_ratio_minimal']:.2f}x)"
                    for key, rate in row.items()
                    if key.endswith("_per_s")
                )
            )
        elif row["scenario"] == "pages":
            lines.append(f"{head} p50 {row['p50_ms']:.1f} ms  slowest {row['max_ms']:.1f} ms")
        elif row["scenario"] == "blocked":
            lines.append(
                f"{head} p50 none {row['none_p50_ms']:.3f} ms  with {row['blocked']:,} blocked"
                f" {row['blocked_p50_ms']:.3f} ms  ratio {row['ratio']:.2f}x"
                f"  (p99 {row['none_p99_ms']:.3f} / {row['blocked_p99_ms']:.3f} ms"
                + (
                    f"; CPU p50 {row['none_cpu_p50_ms']:.3f} / {row['blocked_cpu_p50_ms']:.3f} ms)"
                    if "none_cpu_p50_ms" in row
                    else ")"
                )
            )
        elif row["scenario"] == "workflows":
            lines.append(
                f"{head} workflow {row['workflow_ms']:>8.1f} ms  plain {row['plain_ms']:>8.1f} ms"
                f"  ratio {row['ratio']:.2f}x"
            )
        elif row["scenario"] == "pickup":
            lines.append(
                f"{head} p50 {row['p50_ms']:.1f} ms  p90 {row['p90_ms']:.1f} ms  max {row['max_ms']:.1f} ms"
                f"  (from the enqueue's request: p50 {row['from_request_p50_ms']:.1f}"
                f"  p90 {row['from_request_p90_ms']:.1f} ms)"
            )
        elif row["scenario"] == "idle":
            lines.append(
                f"{head} {row['transactions_per_s']:.2f} transactions/s  server CPU {row['server_cpu_percent']:.1f}%"
                f" (nobody waiting: {row['nobody_waiting_transactions_per_s']:.2f}/s,"
                f" {row['nobody_waiting_cpu_percent']:.1f}%)"
                f"  GET /jobs p50 {row['get_jobs_p50_ms']:.1f} ms  max {row['get_jobs_max_ms']:.1f} ms"
                f"  ({row['retry_after_answers']} Retry-After answers, {row['errors']} errors)"
                + (
                    f"  claims sent in the window {row['claims_in_window']}"
                    if "claims_in_window" in row
                    else ""
                )
                + (
                    f"  re-polls {row['repolls_per_s']:.1f}/s, {row['transactions_per_repoll']:.2f} transactions each"
                    if "repolls_per_s" in row
                    else ""
                )
                + (
                    f" ({row['repoll_window_transactions_per_s']:.2f} transactions/s while they re-poll)"
                    if "repoll_window_transactions_per_s" in row
                    else ""
                )
            )
        elif row["scenario"] == "backlog":
            lines.append(f"{head} p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms")
        else:
            rss = f"  server max RSS {row['server_max_rss_mb']:.0f} MB" if "server_max_rss_mb" in row else ""
            if "ceiling_runs_per_s" in row:  # the median of several runs: say how far they spread
                runs = row["ceiling_runs_per_s"]
                rss += f"  (median of {len(runs)} runs, {min(runs):,.0f}-{max(runs):,.0f} req/s)"
            lines.append(
                f"{head} {row['requests_per_s']:>7,.0f} req/s {row['jobs_per_s']:>8,.0f} jobs/s"
                f"  p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms  5xx {row['errors_5xx']}"
                f"  server CPU {row['server_cpu_us_per_request']:,.0f} us/req{rss}"
                + (f"  idle {row['idle_pct']:.0f}%" if row.get("idle_pct") is not None else "")
                + (f"  conns {row['connections_by_process']}" if row.get("connections_by_process") else "")
                + (
                    f"  {row['per_ceiling_request']:.2f} per ceiling req  dup {row['duplicates']}"
                    if "per_ceiling_request" in row
                    else ""
                )
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="queuelog-bench",
        description="How fast queuelog is next to the raw database and the web stack, on this machine.",
    )
    parser.add_argument(
        "scenario",
        choices=[
            "core",
            "flow",
            "blocked",
            "price",
            "backlog",
            "http",
            "pages",
            "workflows",
            "all",
            "outage",
            "pickup",
        ],
        help="what to measure; all runs every scenario but outage (a PostgreSQL of its own, stopped and"
        " killed under load: docs/operations.md#outages) and pickup",
    )
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per run (default 5000)")
    parser.add_argument(
        "--backlog", type=int, default=1_000_000, help="jobs in the big backlog (default 1,000,000)"
    )
    parser.add_argument(
        "--blocked",
        type=int,
        default=100_000,
        help="blocked: jobs of the held-back type pending ahead of the others (default 100,000)",
    )
    parser.add_argument("--claims", type=int, default=300, help="blocked: claims timed per run (default 300)")
    parser.add_argument(
        "--pages-jobs", type=int, default=1_000_000, help="jobs in the table for pages (default 1,000,000)"
    )
    parser.add_argument("--batch", type=int, default=100, help="jobs per batch claim (default 100)")
    parser.add_argument(
        "--workflow-jobs",
        type=int,
        default=1000,
        help="workflows: jobs in the chained batch, and dependents of the job completed (default 1000)",
    )
    parser.add_argument(
        "--postgres-url", help="also run on this PostgreSQL server, postgresql+psycopg://... (default: none)"
    )
    parser.add_argument(
        "--sqlite", action=argparse.BooleanOptionalAction, default=True, help="run on SQLite (default: on)"
    )
    parser.add_argument("--clients", type=int, default=4, help="http: client processes (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="http: gunicorn worker processes (default 2)")
    parser.add_argument(
        "--threads", type=int, default=4, help="http: threads per gunicorn worker (default 4)"
    )
    parser.add_argument(
        "--worker-class",
        default=WORKER_CLASS,
        help="http: gunicorn's worker class, for the do-nothing app and queuelog alike (default: queuelog's"
        " gthread, which spreads the connections evenly over the processes; gthread: gunicorn's own)",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="core: time by the wall clock (default) or by this process's CPU time, which on SQLite"
        " measures the work itself on a busy machine (PostgreSQL's server time is then left out)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="price: interleaved rounds, each figure their median (default 3)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="outage: first run the server of this other checkout (e.g. the code before a change), then this one",
    )
    parser.add_argument(
        "--samples", type=int, default=100, help="pickup: pickups timed per setup (default 100)"
    )
    parser.add_argument(
        "--waiting",
        type=int,
        default=500,
        help="pickup: workers waiting on one server in the idle figures, on PostgreSQL (default 500; 0: none)",
    )
    parser.add_argument(
        "--code",
        type=Path,
        default=None,
        help="pickup: run the servers from this checkout (e.g. main's, for a before/after), default this one",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.scenario == "outage":
        from queuelog.bench.outage import print_outage, run_outage

        runs = ([(f"before ({args.before})", args.before)] if args.before else []) + [("this checkout", None)]
        results = [(label, run_outage(server_path=path)) for label, path in runs]
        if args.json:
            print(json.dumps([{"run": label, **result.__dict__} for label, result in results], indent=2))
        for label, result in [] if args.json else results:
            print_outage(result, label)
        return 0
    if args.scenario == "pickup":
        from queuelog.bench.pickup import ROOT, scenario_idle, scenario_pickup

        code = (args.code or ROOT).resolve()
        with tempfile.TemporaryDirectory(prefix="queuelog-bench-") as tmp:
            rows = scenario_pickup(
                Path(tmp), code, args.postgres_url, samples=args.samples, sqlite=args.sqlite
            )
            if args.postgres_url and args.waiting:
                rows.append(scenario_idle(Path(tmp), code, args.postgres_url, waiting=args.waiting))
        print(json.dumps(rows, indent=2) if args.json else _table(rows))
        return 0

    use_clock(args.clock)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="queuelog-bench-") as tmp:
        targets = ([Target(Path(tmp))] if args.sqlite else []) + (
            [Target(Path(tmp), args.postgres_url)] if args.postgres_url else []
        )
        for target in targets:
            try:
                if args.scenario in ("core", "all"):
                    rows += scenario_core(target, args.jobs, args.batch)
                if args.scenario in ("flow", "all"):
                    from queuelog.bench.flow import scenario_flow

                    rows += scenario_flow(target, args.jobs, args.batch)
                if args.scenario in ("blocked", "all"):
                    from queuelog.bench.blocked import scenario_blocked

                    rows += scenario_blocked(target, args.claims, args.blocked)
                if args.scenario in ("price", "all"):
                    from queuelog.bench.price import scenario_price

                    rows += scenario_price(target, args.jobs, args.batch, args.rounds)
                if args.scenario in ("workflows", "all"):
                    from queuelog.bench.workflows import scenario_workflows

                    rows += scenario_workflows(target, args.workflow_jobs, args.rounds)
                if args.scenario in ("backlog", "all"):
                    rows += scenario_backlog(target, args.backlog)
                if args.scenario in ("pages", "all"):
                    from queuelog.bench.pages import scenario_pages

                    rows += scenario_pages(target, args.pages_jobs)
                if args.scenario in ("http", "all"):
                    from queuelog.bench.http import scenario_http

                    rows += scenario_http(
                        target,
                        args.jobs,
                        clients=args.clients,
                        workers=args.workers,
                        threads=args.threads,
                        batch=args.batch,
                        worker_class=args.worker_class,
                    )
            finally:
                target.cleanup()
    print(json.dumps(rows, indent=2) if args.json else _table(rows))
    return 0
