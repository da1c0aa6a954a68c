"""Headless Chromium (Debian's package) driven by Playwright, against gunicorn on the test database."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


BROWSER_NEEDS = (
    "browser tests need Debian's packages chromium and fonts-noto-cjk (apt-get install chromium "
    "fonts-noto-cjk; the Chinese pages need the fonts) and Playwright from the test extra "
    "(pip install -e '.[test]')"
)
E2E = Path(__file__).resolve().parent


def chromium_executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_missing() -> list[str]:
    """What this machine lacks of BROWSER_NEEDS (an empty list: nothing)."""
    missing = []
    if chromium_executable() is None:
        missing.append("chromium")
    fc_list = shutil.which("fc-list")
    fonts = subprocess.run([fc_list, ":lang=zh"], capture_output=True, text=True).stdout if fc_list else ""
    if not fonts.strip():
        missing.append("fonts-noto-cjk")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright")
    return missing


def pytest_collection_modifyitems(config, items):
    """Skip the browser tests with one reason per file when something they need is missing (or fail them
    when QUEUELOG_REQUIRE_BROWSER is set, as .ci/run does)."""
    ours = [item for item in items if item.path.is_relative_to(E2E)]
    if not ours:
        return
    missing = browser_missing()
    if not missing:
        return
    reason = f"{BROWSER_NEEDS}; missing here: {', '.join(missing)}"
    if os.environ.get("QUEUELOG_REQUIRE_BROWSER"):
        raise pytest.UsageError(f"QUEUELOG_REQUIRE_BROWSER is set but {reason}")
    for item in ours:
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Console:
    """Every console error, uncaught exception and CSP violation a page reports."""

    def __init__(self):
        self.problems: list[str] = []

    def watch(self, page) -> None:
        def on_console(msg) -> None:
            # "Failed to load resource" is reported below for what matters: a document's own status (a
            # 422 for a form with errors) is checked by the tests themselves.
            if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
                self.problems.append(f"{page.url}: {msg.text}")

        def on_response(response) -> None:
            if response.request.resource_type != "document" and response.status >= 400:
                self.problems.append(f"{page.url}: {response.url} answered {response.status}")

        page.on("console", on_console)
        page.on("response", on_response)

        def on_failed(request) -> None:
            # A request the browser dropped because the page moved on (a click that came before a deferred
            # script or a background fetch finished, frequent on a loaded machine) is no fault of the page.
            if request.failure != "net::ERR_ABORTED":
                self.problems.append(f"{page.url}: {request.url} failed ({request.failure})")

        page.on("requestfailed", on_failed)
        page.on("pageerror", lambda exc: self.problems.append(f"{page.url}: {exc}"))


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def new_page(chromium, console):
    """Pages in separate browser contexts (separate cookies), all watched by ``console``."""
    contexts = []

    def make(viewport=(1100, 800), locale="en-US"):
        context = chromium.new_context(viewport={"width": viewport[0], "height": viewport[1]}, locale=locale)
        contexts.append(context)
        page = context.new_page()
        # A wait that succeeds returns at once; the bound is for CI on a loaded 2-core machine, where a
        # login's redirect to the dashboard once took over 10 s.
        page.set_default_timeout(30_000)
        console.watch(page)
        return page

    yield make
    for context in contexts:
        context.close()


def log_in(page, base: str, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    """Log in through the login form (an English page) and wait for the redirect to the dashboard. The
    wait ends when the dashboard's answer arrives, not when its last resource has loaded: the steps that
    follow wait for what they need. A login that goes nowhere fails with where the page stands and what
    it says."""
    # Imported here: without Playwright this module still loads, to say what the browser tests need.
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page.goto(f"{base}/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    try:
        page.wait_for_url(f"{base}/", wait_until="commit")
    except PlaywrightTimeoutError:
        text = " ".join(page.locator("body").inner_text(timeout=5_000).split())[:500]
        raise AssertionError(f"the login of {username!r} stayed at {page.url}: {text}") from None


def screenshot(page, name: str) -> None:
    """Save a screenshot for the README when QUEUELOG_SCREENSHOT_DIR is set (docs/ in the repository)."""
    folder = os.environ.get("QUEUELOG_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
