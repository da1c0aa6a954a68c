"""The docs cannot drift from the code (docs/development.md, "The documentation"): the settings table
against ``queuelog/config.py``, the numbers the pages quote against the constants that own them, the
upgrade notes against the migrations, and every link of the README and the docs against its target."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from queuelog.client import Client
from queuelog.config import OTHER_VARIABLES, SPECS
from queuelog.queue import console, limits, monitor, running
from queuelog.wire.job import Event, Job
from tests.conftest import ROOT

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# Read by name outside the settings (queuelog/config.py's OTHER_VARIABLES): the instance folder, gunicorn's
# settings, the worker client, the tests; but one an example makes up for itself (docs/client.md passes the
# key to Python), and the misspelt name docs/configuration.md shows the warning about.
EXAMPLE_VARIABLES = {"QUEUELOG_KEY", "QUEUELOG_LEASE_SECOND"}
OTHER_SETTINGS = OTHER_VARIABLES - EXAMPLE_VARIABLES


def settings_table(column: int = 1) -> dict[str, str]:
    """name -> default cell (or the ``column``-th cell: 2 is what it accepts) of the table under
    "## Settings" in docs/configuration.md."""
    text = (DOCS / "configuration.md").read_text()
    section = text[text.index("\n## Settings\n") :]
    section = section[: section.index("\n## ", 5)]
    table: dict[str, str] = {}
    for row in re.findall(r"^\| (`QUEUELOG_.*) \|$", section, re.M):
        cells = row.split(" | ")
        [name] = re.findall(r"`(QUEUELOG_[A-Z_]+)`", cells[0])
        table[name] = cells[column]
    return table


def test_the_settings_table_lists_every_setting_of_config_py_and_no_other():
    documented = set(settings_table())
    assert documented - {"QUEUELOG_INSTANCE_PATH"} == {spec.variable for spec in SPECS.values()}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_documented_default_is_the_code_s(name):
    cell = settings_table()[f"QUEUELOG_{name}"].strip("`")
    default = SPECS[name].default
    if default is None:  # a default the code computes: the table says in words what it is
        assert not re.fullmatch(r"[\d.,]+", cell), (name, cell)
    elif isinstance(default, bool):
        assert cell == str(default).lower(), (name, cell)
    elif isinstance(default, int | float):
        assert float(cell.replace(",", "")) == default, (name, cell, default)
    else:
        assert cell == default, (name, cell, default)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_table_says_what_each_setting_accepts_in_the_code_s_words(name):
    """The words of the table are those of the one-line error at start-up (queuelog/config.py)."""
    assert settings_table(column=2)[f"QUEUELOG_{name}"] == SPECS[name].accepts


def test_every_setting_the_docs_name_exists_and_every_one_the_code_reads_is_documented():
    named = {m for page in PAGES for m in re.findall(r"QUEUELOG_[A-Z_]+[A-Z]", page.read_text())}
    known = {spec.variable for spec in SPECS.values()} | OTHER_SETTINGS
    assert named - known - EXAMPLE_VARIABLES == set(), "the docs name settings the code does not read"
    sources = [*ROOT.glob("queuelog/**/*.py"), ROOT / "gunicorn.conf.py", *ROOT.glob("tests/**/*.py")]
    sources.remove(Path(__file__))
    read = {m for path in sources for m in re.findall(r"[\"'](QUEUELOG_[A-Z_]+)[\"']", path.read_text())}
    configuration = (DOCS / "configuration.md").read_text()
    assert {name for name in (read | known) - EXAMPLE_VARIABLES if f"`{name}`" not in configuration} == set()


# (page, pattern with one number, the constant that owns it): the pattern must occur, and only with it.
QUOTED_NUMBERS = [
    (
        "console.md",
        r"from the ([\d,]+) newest completed and the ([\d,]+) newest failed",
        monitor.WORKER_SAMPLE,
    ),
    ("console.md", r"come from the newest ([\d,]+) jobs of the type", monitor.TYPE_SAMPLE),
    ("pages.md", r"come from the type's newest ([\d,]+) jobs", monitor.TYPE_SAMPLE),
    ("console.md", r"at most ([\d,]+) running jobs are listed", monitor.HELD_READ),
    ("console.md", r"batch of at most ([\d,]+) jobs", console.BATCH),
    ("console.md", r"batches of ([\d,]+)", console.BATCH),
    ("pages.md", r"batches of ([\d,]+)", console.BATCH),
    ("console.md", r"counted up to ([\d,]+)", console.COUNT_CAP),
    ("console.md", r"\(([\d,]+) by default\) per page", SPECS["SEARCH_SCAN"].default),
    ("pages.md", r"newest ([\d,]+) jobs that match those", SPECS["SEARCH_SCAN"].default),
    ("console.md", r"`QUEUELOG_BULK_STEP_SECONDS` \(([\d.]+) s\)", SPECS["BULK_STEP_SECONDS"].default),
    ("running-jobs.md", r"`delay_seconds` from now \(1 to ([\d,]+)", running.MAX_SNOOZE_SECONDS),
    ("flow-control.md", r"\| `concurrency_limit` \| 1 to ([\d,]+)", limits.MAX_CONCURRENCY),
    ("flow-control.md", r"\| `rate_limit` \| 1 to ([\d,]+)", limits.MAX_RATE),
    ("flow-control.md", r"\| `rate_period` \| 1 to ([\d,]+) seconds", limits.MAX_PERIOD),
    ("flow-control.md", r"; ([\d,]+) when a rate limit is given without one", limits.DEFAULT_PERIOD),
]


@pytest.mark.parametrize(("page", "pattern", "value"), QUOTED_NUMBERS)
def test_the_numbers_the_pages_quote_are_the_code_s(page, pattern, value):
    text = " ".join((DOCS / page).read_text().split())
    found = re.findall(pattern, text)
    assert found, f"docs/{page} no longer says {pattern!r}"
    numbers = {
        float(n.replace(",", "")) for match in found for n in ([match] if isinstance(match, str) else match)
    }
    assert numbers == {value}, (page, pattern, numbers, value)


def test_the_upgrade_notes_cover_every_migration():
    revisions = sorted(p.name[:4] for p in (ROOT / "queuelog/migrations/versions").glob("[0-9]*.py"))
    text = (DOCS / "operations.md").read_text()
    upgrades = text[text.index("\n## Upgrades\n") :]
    upgrades = upgrades[: upgrades.index("\n## ", 5)]
    assert re.findall(r"^\| (\d{4}) \|", upgrades, re.M) == revisions


def slug(heading: str) -> str:
    """The anchor of a heading, as GitHub and MyST (myst_heading_anchors) make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#{1,3} (.*)$", text, re.M)}


def links() -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.S | re.M)
        found += [(page, target) for target in re.findall(r"\]\(([^)\s]+)\)", text)]
    return found


@pytest.mark.parametrize(("page", "target"), links(), ids=[f"{p.name}->{t}" for p, t in links()])
def test_every_link_reaches_its_page_and_heading(page, target):
    if re.match(r"[a-z]+:", target):
        return  # a web address
    path, _, fragment = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{page.name}: {target}"
    if fragment:
        assert fragment in anchors(destination), f"{page.name}: {target}"


def signature_text(function) -> str:
    """A method's parameters as docs/client.md writes them: no annotations, no ``self``."""
    signature = inspect.signature(function)
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters[1:], return_annotation=inspect.Signature.empty))


def test_the_client_page_gives_each_method_its_real_parameters():
    text = (DOCS / "client.md").read_text()
    assert f"## `Client(url, key{signature_text(Client.__init__)[len('(url, key') :]}`" in text
    rows = dict(re.findall(r"^\| `(\w+)(\(.*?\))` \|", text, re.M))
    public = {name for name, value in vars(Client).items() if callable(value) and not name.startswith("_")}
    assert set(rows) == public - {"close"}  # close() is told in the prose
    for name, written in rows.items():
        assert written == signature_text(getattr(Client, name)), name


def test_the_client_page_names_every_field_of_a_job_and_an_event():
    text = (DOCS / "client.md").read_text()
    section = text[text.index("\n## Jobs and events\n") :]
    section = section[: section.index("\n## ", 5)]
    named = set(re.findall(r"`(\w+)`", section))
    assert {f.name for f in dataclasses.fields(Job)} <= named
    assert {f.name for f in dataclasses.fields(Event)} <= named


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_table_is_cut_by_a_paragraph(page):
    """A table row right under a line of prose is a table that a paragraph broke in two."""
    lines = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.S | re.M).split("\n")
    broken = [
        f"{page.name}:{number + 1}: {line[:60]}"
        for number, line in enumerate(lines)
        if number
        and line.startswith("|")
        and lines[number - 1].strip()
        and not lines[number - 1].startswith("|")
    ]
    assert broken == []
