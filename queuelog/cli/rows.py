"""The cells of the commands' tab-separated rows (docs/cli.md): one row per line, whatever a text holds."""

from __future__ import annotations

from datetime import UTC, datetime


def time_cell(value: datetime | None) -> str:
    """RFC 3339 in UTC, to the second, or "-"."""
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def text_cell(text: str | None) -> str:
    """Free text (a description): its tabs and line breaks shown as spaces, so that a row stays one line of
    its fields."""
    return " ".join(text.replace("\t", " ").splitlines()) if text else ""
