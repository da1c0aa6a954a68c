"""The example of docs/client.md ("Example"), run as written, the way
tests/test_readme.py runs the README's walkthrough: in a folder laid out like the checkout, against a live
server on a new SQLite instance."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.test_readme import checkout  # noqa: F401 - the fixture
from tests.test_readme_sections import example_block, run_block


def test_the_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    block = example_block("## Example", ROOT / "docs" / "client.md")
    assert "python - <<'EOF'" in block and "queue.wait(" in block
    result = run_block(block, checkout, tmp_path, threads=8, run=None)
    documented = [line.removeprefix("#   ") for line in block.splitlines() if line.startswith("#   ")]
    assert result.stdout.splitlines() == documented  # a new database: the ids are those shown
    assert "job 2 (sync) failed for good" in result.stderr  # the worker ran it, and logged to the shell
    assert "stopped cleanly" in result.stderr
