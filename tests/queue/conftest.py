"""The queue layer's tests share an injectable clock and a queue on it (fixed backoff, no jitter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queuelog.queue import Queue


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def q(app, clock) -> Queue:
    db = app.extensions["queuelog"]["db"]
    return Queue(db, lease_seconds=30, backoff_base=10, backoff_max=100, clock=clock, rand=lambda: 0.5)
