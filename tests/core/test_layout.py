"""The core's modules stay small enough to read in one sitting (docs/architecture/layout.md): none passes 400
lines; one that grows past it is split by concern, as the decider's and the dispatcher's were."""

from __future__ import annotations

from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "streams" / "core"
MOST_LINES = 400


def test_no_core_module_passes_400_lines() -> None:
    sizes = {str(p.relative_to(CORE)): len(p.read_text().splitlines()) for p in sorted(CORE.rglob("*.py"))}
    assert len(sizes) > 20  # the core is there
    assert {name: n for name, n in sizes.items() if n > MOST_LINES} == {}
