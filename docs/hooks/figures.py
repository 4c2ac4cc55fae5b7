"""MkDocs hook: the figures other pages quote come from the performance page, so that they cannot drift.

In `performance.md` a quoted figure is written `{{ name = value }}` (the page shows the value); elsewhere
`{{ name }}` stands for it and is filled in at build time. A name the performance page does not define fails the
build, as does one defined twice.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

PERFORMANCE = Path(__file__).resolve().parents[1] / "performance.md"
DEFINED = re.compile(r"\{\{\s*([a-z][a-z0-9_.]*)\s*=\s*(.+?)\s*\}\}")
QUOTED = re.compile(r"\{\{\s*([a-z][a-z0-9_.]*)\s*\}\}")


def figures(text: str | None = None) -> dict[str, str]:
    """Every named figure of the performance page: name -> value as written."""
    found: dict[str, str] = {}
    for name, value in DEFINED.findall(PERFORMANCE.read_text() if text is None else text):
        if name in found:
            raise PluginError(f"performance.md names the figure {name!r} twice")
        found[name] = value
    return found


def filled(markdown: str, known: dict[str, str], page: str) -> str:
    """`markdown` with its figures shown: definitions as their value, quotations as the value they name."""
    def quote(match: re.Match[str]) -> str:
        if match.group(1) not in known:
            raise PluginError(f"{page} quotes the figure {match.group(1)!r}, which performance.md does not name")
        return known[match.group(1)]

    return QUOTED.sub(quote, DEFINED.sub(lambda m: m.group(2), markdown))


_KNOWN: dict[str, str] = {}  # the performance page's figures, read once a build (`on_pre_build`)


def on_pre_build(config: Any) -> None:
    _KNOWN.clear()
    _KNOWN.update(figures())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return filled(markdown, _KNOWN, page.file.src_path)
