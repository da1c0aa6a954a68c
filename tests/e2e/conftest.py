"""Headless Chromium (Debian's package) driven by Playwright, against gunicorn on the test database."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def chromium():
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        if os.environ.get("QUEUELOG_REQUIRE_BROWSER"):
            pytest.fail("QUEUELOG_REQUIRE_BROWSER is set but no chromium is installed")
        pytest.skip("browser tests need Chromium: apt-get install chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
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
        page.on("requestfailed", lambda request: self.problems.append(f"{page.url}: {request.url} failed"))
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
        page.set_default_timeout(10_000)
        console.watch(page)
        return page

    yield make
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> None:
    """Save a screenshot for the README when QUEUELOG_SCREENSHOT_DIR is set (docs/ in the repository)."""
    folder = os.environ.get("QUEUELOG_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
