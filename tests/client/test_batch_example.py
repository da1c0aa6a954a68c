"""The example of docs/batches.md ("Example"), run as written against a live server on a new SQLite
instance, the way tests/client/test_example.py runs the client page's: its output, line by line, is the
one the page shows."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.test_readme import checkout  # noqa: F401 - the fixture
from tests.test_readme_sections import example_block, run_block


def test_the_batch_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    block = example_block("## Example", ROOT / "docs" / "batches.md")
    assert "queue.batch(" in block and "queue.wait_batch(" in block and "batches show" in block
    result = run_block(block, checkout, tmp_path, threads=8, run=None)
    documented = [line.removeprefix("#   ") for line in block.splitlines() if line.startswith("#   ")]
    assert result.stdout.splitlines() == documented  # a new database: the ids are those shown
    assert "stopped cleanly" in result.stderr
