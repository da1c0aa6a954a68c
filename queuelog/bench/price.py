"""``queuelog-bench price``: what each of queuelog's guarantees costs on SQLite, in one run.

The raw driver runs queuelog's own statements (core.py's raw loop) on a fresh database at the current
schema, then on databases with one part taken away: the history row each transition writes, the
triggers that keep the counts exact, the indexes the job lists page through; then all three; and
the alternative of keeping a job's history as a JSON array in its own row (as Oban and River keep a job's
attempts) instead of in ``job_events``. The minimal loop (minimal.py) is the floor. Variants run
interleaved, round after round, and each figure is the median of the rounds: on a shared machine that
keeps a busy minute from landing on one variant only.

SQLite only: on PostgreSQL each statement writes its own history rows, so there is nothing to leave out
without rewriting the statements.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from typing import Any

from queuelog.bench import minimal
from queuelog.bench.core import _spec, raw_loop
from queuelog.bench.targets import Target, progress

COUNTER_TRIGGERS = ("jobs_count_insert", "jobs_count_update", "jobs_count_delete", "jobs_throughput")
LIST_INDEXES = ("ix_jobs_owner_id", "ix_jobs_type_id", "ix_jobs_status_id")


@dataclass(frozen=True)
class Variant:
    label: str
    history: bool = True  # a job_events row for each transition
    counters: bool = True
    lists: bool = True
    row_history: bool = False  # the history appended to a JSON array in the job's row instead


VARIANTS = (
    Variant("queuelog's statements"),
    Variant("without the history rows", history=False),
    Variant("without the counter triggers", counters=False),
    Variant("without the list indexes", lists=False),
    Variant("without all three", history=False, counters=False, lists=False),
    Variant("history in the job row instead", history=False, row_history=True),
)
FLOOR = "minimal loop"


class RowHistory:
    """queuelog's SQLite statements, each also appending its transition to a ``history`` column of the
    job's row: the enqueue starts the array, the claim and the completions add to it."""

    def __init__(self, sql: Any):
        self._sql = sql
        entry = "json_array(:now, '{event}', {actor}, {attempt})"
        appended = "history = json_insert(history, '$[#]', " + entry + ")"
        self.INSERT = _add(
            _add(sql.INSERT, "updated_at) VALUES", "updated_at, history) VALUES"),
            ":now, :now)",
            ":now, :now, json_array(" + entry.format(event="enqueued", actor=":owner", attempt=0) + "))",
        )
        claimed = appended.format(event="claimed", actor=":worker", attempt="retry_count + 1")
        completed = appended.format(event="completed", actor=":worker", attempt="retry_count + 1")
        self.CLAIM_IN_ORDER = {
            False: _add(
                sql.CLAIM_IN_ORDER[False], "updated_at = :now WHERE", f"updated_at = :now, {claimed} WHERE"
            )
        }
        self.COMPLETE = _add(
            sql.COMPLETE, "lease_expires_at = NULL WHERE", f"lease_expires_at = NULL, {completed} WHERE"
        )
        self.COMPLETE_EACH = _add(
            sql.COMPLETE_EACH, "lease_expires_at = NULL FROM", f"lease_expires_at = NULL, {completed} FROM"
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sql, name)


def _add(statement: str, old: str, new: str) -> str:
    """``statement`` with its one ``old`` replaced: a statement that no longer has it fails the run."""
    if statement.count(old) != 1:
        raise AssertionError(f"price: {old!r} is no longer once in {statement[:60]!r}...")
    return statement.replace(old, new)


def prepare(target: Target, url: str, variant: Variant) -> None:
    """Take the variant's parts away from a fresh database (a name that no longer exists fails)."""
    conn = target.raw_connect(url)
    statements = [] if variant.counters else [f"DROP TRIGGER {name}" for name in COUNTER_TRIGGERS]
    statements += [] if variant.lists else [f"DROP INDEX {name}" for name in LIST_INDEXES]
    statements += ["ALTER TABLE jobs ADD COLUMN history TEXT"] if variant.row_history else []
    for statement in statements:
        conn.execute(statement)
    conn.close()


def scenario_price(target: Target, n: int, batch: int = 100, rounds: int = 3) -> list[dict[str, Any]]:
    if target.engine != "sqlite":
        print(
            "price: SQLite only (PostgreSQL's statements write their own history); skipped", file=sys.stderr
        )
        return []
    payloads = [_spec(i).payload_json for i in range(n)]
    runs: dict[str, list[dict[str, float]]] = {v.label: [] for v in VARIANTS} | {FLOOR: []}
    for r in range(rounds):
        for i, variant in enumerate(VARIANTS):
            url = target.fresh(f"price-{r}-{i}")
            prepare(target, url, variant)
            sql = RowHistory(target.sql) if variant.row_history else None
            runs[variant.label].append(raw_loop(target, url, n, batch, sql=sql, history=variant.history))
            progress("price", r * (len(VARIANTS) + 1) + i + 1, rounds * (len(VARIANTS) + 1))
        runs[FLOOR].append(minimal.run(target, payloads, batch, name=f"price-minimal-{r}"))
        progress("price", (r + 1) * (len(VARIANTS) + 1), rounds * (len(VARIANTS) + 1))
    medians = {
        label: {op: statistics.median(run[op] for run in samples) for op in samples[0]}
        for label, samples in runs.items()
    }
    floor = medians[FLOOR]
    return [
        {
            "scenario": "price",
            "engine": target.engine,
            "operation": label,
            **{f"{op}_per_s": rate for op, rate in figures.items()},
            **{f"{op}_ratio_minimal": rate / floor[op] for op, rate in figures.items()},
        }
        for label, figures in medians.items()
    ]
