"""Fixtures for the worker tests."""

import pytest

from tests.worker.processes import Workers


@pytest.fixture
def workers(tmp_path):
    """Starts queuelog-worker processes; kills any still running at the end of the test."""
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()
