"""Rendering a report in a real headless Chromium (Debian's package; `make test` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is not installed: `make test` installs it (apt-get install chromium)"
    return found


def render(page: Path, tmp: Path) -> tuple[str, Path]:
    """The DOM Chromium built from the page, and a screenshot of it."""
    # No network beyond loopback here: without the background-networking flags Chromium keeps
    # trying Google's hosts at every start (see the machine notes).
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp / 'profile'}"]
    url = page.resolve().as_uri()
    dom = subprocess.run([chromium(), *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    shot = tmp / "page.png"
    subprocess.run([chromium(), *flags, "--window-size=1280,1600", f"--screenshot={shot}", url],
                   capture_output=True, timeout=120, check=True)
    return dom, shot


def assert_shows_plots(page: Path, tmp: Path, plots: int) -> str:
    """Chromium lays the page out with `plots` drawn figures (SVG with paths), and paints them."""
    from PIL import Image

    dom, shot = render(page, tmp)
    assert "<title>tribunal audit" in dom, dom[:500]
    assert dom.count("<figure class=\"plot\">") == plots, dom[:2000]
    assert dom.count("<svg") >= plots and dom.count("<path") > 10 * plots
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50, "the screenshot is nearly blank: the plots did not paint"
    return dom
