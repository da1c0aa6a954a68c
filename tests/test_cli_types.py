"""``flask types limit`` and the limits in ``types list`` on both engines (docs/flow-control.md): good and
bad ``--rate`` forms, refusals on one line of stderr with exit status 1, changes audited as ``cli``."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog


def listing(runner) -> dict[str, list[str]]:
    result = runner.invoke(args=["types", "list"])
    assert result.exit_code == 0, result.output
    return {row[0]: row[4:] for row in (line.split("\t") for line in result.stdout.splitlines())}


def settings(queue, name: str = "pdf") -> tuple:
    t = queue.types.get(name)
    return (t.concurrency_limit, t.rate_limit, t.rate_period)


@pytest.mark.parametrize(
    ("rate", "limit", "period", "shown"),
    [
        ("100/m", 100, 60, "100/m"),
        ("10/30s", 10, 30, "10/30s"),
        ("5/s", 5, 1, "5/s"),
        ("1/h", 1, 3600, "1/h"),
        ("2/d", 2, 86_400, "2/d"),
        ("7/5m", 7, 300, "7/5m"),
        ("7/90s", 7, 90, "7/90s"),
        ("1000000/24h", 1_000_000, 86_400, "1000000/d"),
        (" 3/2h ", 3, 7200, "3/2h"),
    ],
)
def test_good_rate_forms(runner, queue, rate, limit, period, shown):
    result = runner.invoke(args=["types", "limit", "pdf", "--rate", rate])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"limited type pdf: concurrency -, rate {shown}\n"
    assert settings(queue) == (None, limit, period)
    assert listing(runner)["pdf"] == ["-", shown]


@pytest.mark.parametrize(
    ("rate", "words"),
    [
        ("100", "is not N/PERIOD"),
        ("100/", "is not N/PERIOD"),
        ("100/min", "is not N/PERIOD"),
        ("100/60", "is not N/PERIOD"),
        ("/m", "is not N/PERIOD"),
        ("-1/m", "is not N/PERIOD"),
        ("1.5/m", "is not N/PERIOD"),
        ("10/1.5m", "is not N/PERIOD"),
        ("100/M", "is not N/PERIOD"),
        ("", "is not N/PERIOD"),
        ("0/m", "--rate: must be a number from 1 to 1000000"),
        ("1000001/m", "--rate: must be a number from 1 to 1000000"),
        ("10/0s", "--rate period: must be a number from 1 to 86400"),
        ("10/2d", "--rate period: must be a number from 1 to 86400"),
        ("10/86401s", "--rate period: must be a number from 1 to 86400"),
    ],
)
def test_bad_rate_forms_are_one_line_and_change_nothing(runner, queue, rate, words):
    runner.invoke(args=["types", "limit", "pdf", "--concurrency", "4", "--rate", "9/m"])
    result = runner.invoke(args=["types", "limit", "pdf", "--concurrency", "2", "--rate", rate])
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: ") and words in line, line
    assert settings(queue) == (4, 9, 60)


def test_concurrency_is_set_and_removed_and_each_change_is_audited(runner, queue, app):
    result = runner.invoke(args=["types", "limit", "email", "--concurrency", "5", "--rate", "100/m"])
    assert result.exit_code == 0 and result.stdout == "limited type email: concurrency 5, rate 100/m\n"
    assert listing(runner) == {"email": ["5", "100/m"], "pdf": ["-", "-"], "sync": ["-", "-"]}
    result = runner.invoke(args=["types", "limit", "email", "--rate", "none"])
    assert result.stdout == "limited type email: concurrency 5, rate -\n"
    result = runner.invoke(args=["types", "limit", "email", "--concurrency", "NONE"])
    assert result.exit_code == 0 and settings(queue, "email") == (None, None, None)
    with app.extensions["queuelog"]["db"].session() as session:
        rows = list(session.scalars(select(AuditLog).where(AuditLog.action == "type.update")))
    assert [(r.actor, r.target) for r in rows] == [("cli", "email")] * 3
    assert rows[1].detail == "rate_limit: 100 -> none; rate_period: 60 -> none"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--concurrency", "0"], "--concurrency: must be a number from 1 to 10000"),
        (["--concurrency", "10001"], "--concurrency: must be a number from 1 to 10000"),
        (["--concurrency", "-1"], "--concurrency: give a whole number from 1 to 10000, or none"),
        (["--concurrency", "1.5"], "--concurrency: give a whole number from 1 to 10000, or none"),
        (["--concurrency", "two"], "--concurrency: give a whole number from 1 to 10000, or none"),
        ([], "give --concurrency, --rate or both"),
    ],
)
def test_bad_concurrency_and_no_option(runner, queue, args, words):
    result = runner.invoke(args=["types", "limit", "sync", *args])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"Error: {words}"]
    assert settings(queue, "sync") == (None, None, None)


def test_an_unknown_type(runner):
    result = runner.invoke(args=["types", "limit", "nope", "--concurrency", "3"])
    assert result.exit_code == 1 and result.stderr == "Error: no type 'nope'\n"


def test_a_concurrency_with_spaces_around_it_is_taken_as_a_rate_is(runner, queue):
    """A rate with spaces around it (" 3/2h ") is taken, and " none " is none: a concurrency's count is
    read the same way, as the job type's page reads its fields."""
    result = runner.invoke(args=["types", "limit", "sync", "--concurrency", " 4 ", "--rate", " 3/2h "])
    assert result.exit_code == 0, result.output
    assert settings(queue, "sync") == (4, 3, 7200)


def test_adding_and_switching_types_is_audited_as_cli(runner, app):
    for args in (
        ["add", "webhook", "--description", "POST a URL"],
        ["pause", "webhook"],
        ["disable", "webhook"],
    ):
        result = runner.invoke(args=["types", *args])
        assert result.exit_code == 0, result.output
    with app.extensions["queuelog"]["db"].session() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.target == "webhook").order_by(AuditLog.id))
        assert [(r.actor, r.action, r.detail) for r in rows] == [
            ("cli", "type.create", None),
            ("cli", "type.pause", "paused: false -> true"),
            ("cli", "type.disable", "enabled: true -> false"),
        ]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (
            "-dash",
            "Error: a type name is 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
        ),
        ("report\n", "Error: a type name is 1 to 64 letters"),
        ("email", "Error: type 'email' already exists"),
    ],
)
def test_a_refused_new_type_is_one_line_and_adds_nothing(runner, queue, name, words):
    before = [t.name for t in queue.types.all()]
    result = runner.invoke(args=["types", "add", "--", name])
    assert result.exit_code == 1 and result.stderr.startswith(words) and result.stderr.count("\n") == 1
    assert [t.name for t in queue.types.all()] == before


def test_a_too_long_description_is_refused_by_the_command_line(runner, queue):
    result = runner.invoke(args=["types", "add", "report", "--description", "x" * 2001])
    assert (
        result.exit_code == 1 and result.stderr == "Error: --description: must be at most 2000 characters\n"
    )
    assert "report" not in [t.name for t in queue.types.all()]


def test_a_description_with_tabs_and_line_breaks_stays_in_its_cell(runner):
    """Each type is one line of six tab-separated fields (docs/cli.md), whatever its description holds."""
    added = runner.invoke(args=["types", "add", "report", "--description", "line1\nline2\tx\r\nend"])
    assert added.exit_code == 0, added.output
    rows = runner.invoke(args=["types", "list"]).output.splitlines()
    [row] = [line for line in rows if line.startswith("report\t")]
    assert row.split("\t") == ["report", "enabled", "-", "line1 line2 x end", "-", "-"]
    assert all(len(line.split("\t")) == 6 for line in rows)
