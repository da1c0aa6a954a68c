"""What flow control costs the claim (docs/flow-control.md): the queue layer's loops (core.py) on a type
without limits, then on a type with a concurrency limit and a rate limit too high to ever hold a job back,
so that every claim works out the type's room and spends its tokens. The ratio is limited / unlimited.
"""

from __future__ import annotations

from typing import Any

from queuelog.bench.core import layer_loop
from queuelog.bench.targets import Target
from queuelog.queue.limits import MAX_CONCURRENCY, MAX_RATE


def scenario_flow(target: Target, n: int, batch: int = 100) -> list[dict[str, Any]]:
    plain_queue = target.queue(target.fresh("flow-plain"))
    plain = layer_loop(plain_queue, n, batch)
    plain_queue.db.dispose()
    limited_queue = target.queue(target.fresh("flow-limited"))
    limited_queue.types.update("bench", concurrency_limit=MAX_CONCURRENCY, rate_limit=MAX_RATE, rate_period=1)
    limited = layer_loop(limited_queue, n, batch)
    limited_queue.db.dispose()
    return [
        {
            "scenario": "flow",
            "engine": target.engine,
            "operation": op,
            "unlimited_per_s": plain[op],
            "limited_per_s": limited[op],
            "ratio": limited[op] / plain[op],
        }
        for op in plain
    ]
