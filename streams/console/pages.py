"""The console's pages, server-rendered (Jinja2, autoescaped): each page a layout and its live parts (elements
with `data-fragment`; `?fragment=NAME` renders one alone), so the first render and an update draw the same HTML
from the same code.

No front-end build: one small script (`SCRIPT`) opens the page's event stream and, on each event that concerns
the page (at most one refresh every 200 ms), fetches the page once more and swaps its live parts in; forms post
as forms. Plots are matplotlib SVG, drawn on the server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader

PAGE_SIZE = 50  # rows of a long table on one page

STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fafafa; }
header { background: #1f3b73; color: #fff; padding: 0.6em 1.2em; display: flex; gap: 1.5em; align-items: center; }
header a { color: #fff; } header .who { margin-left: auto; font-size: 0.9em; }
main { padding: 1em 1.5em; }
h1 { font-size: 1.4em; margin: 0.4em 0; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; background: #fff; }
td, th { border: 1px solid #c8c8c8; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #eef1f6; }
.ok { color: #1a6b2f; } .bad { color: #a31515; font-weight: 600; } .meta { color: #555; font-size: 0.9em; }
figure { margin: 0.5em 0; } figure svg { max-width: 100%; height: auto; background: #fff; }
pre { background: #fff; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
form.inline { display: inline; } input[type=number] { width: 6em; }
nav.pages a { margin-right: 0.6em; }
"""

SCRIPT = """
(function () {
  const body = document.body;
  const stream = body.dataset.stream;
  if (!stream) return;
  let pending = null;
  function refresh() {  // the page once more, and each live part of it swapped in
    pending = null;
    fetch(window.location.href, {credentials: 'same-origin'})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        const fresh = new DOMParser().parseFromString(html, 'text/html');
        document.querySelectorAll('[data-fragment]').forEach(function (el) {
          const part = fresh.querySelector('[data-fragment="' + el.dataset.fragment + '"]');
          if (part) el.innerHTML = part.innerHTML;
        });
        body.dataset.updated = Date.now();
      });
  }
  // since: the updates told when the page was drawn; the stream tells at once of any this page missed
  const source = new EventSource('/events?' + stream + '&since=' + encodeURIComponent(body.dataset.since || ''));
  source.addEventListener('update', function () { if (!pending) pending = setTimeout(refresh, 200); });
  source.addEventListener('ready', function () { body.dataset.live = 'yes'; });
})();
"""

TEMPLATES = Path(__file__).with_name("templates")  # NAME.html: a page, or a fragment of one
ENVIRONMENT = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)


def render(template: str, **context: Any) -> str:
    return ENVIRONMENT.get_template(f"{template}.html").render(**context)


def page_of(rows: list[Any], page: int) -> tuple[list[Any], int, int]:
    """One page of `rows` (1-based, clamped), its number and how many there are."""
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(max(1, page), pages)
    return rows[(page - 1) * PAGE_SIZE:page * PAGE_SIZE], page, pages
