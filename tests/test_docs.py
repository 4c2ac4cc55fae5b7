"""The documentation's figures: the pages that quote a measured figure take it from the performance page's current
rows (`docs/hooks/figures.py` fills them in at build time), so that no page goes on quoting one that has moved on."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
# a measured figure: a decimal, or a number with a unit of time, size, rate or ratio
FIGURE = re.compile(r"\d[\d,]*\.\d+|\b\d[\d,]*(-\d[\d,]*)?\s*(ms|s|us|MB|kB|GB|x|%|records/s|/s)(?![\w-])")


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures_hook", DOCS / "hooks" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prose(markdown: str) -> str:
    """The page without its quoted figures and code (options, settings and commands are not figures)."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.sub(r"`[^`]*`", "", _hook().QUOTED.sub("", markdown))


def test_every_figure_a_page_quotes_is_one_the_performance_page_names() -> None:
    hook = _hook()
    known = hook.figures()
    assert {"e2e.backlog", "e2e.ratio", "replay.file"} <= known.keys()
    for page in sorted(DOCS.rglob("*.md")):
        shown = hook.filled(page.read_text(), known, page.name)
        assert "{{" not in shown, page


def test_known_limits_quotes_every_measured_figure_from_the_performance_page() -> None:
    page = (DOCS / "known-limits.md").read_text()
    assert len(_hook().QUOTED.findall(page)) >= 15
    assert [m.group(0) for m in FIGURE.finditer(_prose(page))] == []


def test_a_figure_quoted_but_not_named_or_named_twice_fails_the_build() -> None:
    from mkdocs.exceptions import PluginError

    hook = _hook()
    with pytest.raises(PluginError, match="'nowhere'"):
        hook.filled("as fast as {{ nowhere }}", {"e2e.ratio": "0.67"}, "page.md")
    with pytest.raises(PluginError, match="twice"):
        hook.figures("{{ a = 1 s }} and {{ a = 2 s }}")
    assert hook.filled("{{ a = 1 s }}, quoted: {{ a }}", {"a": "1 s"}, "p.md") == "1 s, quoted: 1 s"
    assert FIGURE.findall("about 70,000 records/s") and FIGURE.findall("a third, 0.33") and \
        not FIGURE.findall("issue 46, SPEC §2, 10 apps")
