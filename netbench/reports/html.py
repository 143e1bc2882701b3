"""A self-contained ``report.html`` beside report.md: the same text, figures inlined, nothing fetched.

The markdown report is rendered with markdown-it (already installed with rich), every figure
netbench drew for it is replaced by a ``data:image/png;base64`` URI, styles are inline and a few
lines of inline script make tables sortable by clicking a header. The page names no http(s) URL,
so it opens the same offline, from a CI artifact or an e-mail attachment.

Only figures are inlined, and only those the caller names: a file of that name directly in the
folder, opened without following a link, regular, and a PNG. Any other image source (a path out
of the folder, ``/proc/self/environ``) stays out of the page: its alt text stands in.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Collection
from pathlib import Path

from markdown_it import MarkdownIt

from netbench import safe_files, untrusted

__all__ = ["render_html", "write_html"]

STYLE = """
body {
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #222;
}
h1 { font-size: 1.6rem; border-bottom: 2px solid #ddd; padding-bottom: .3rem; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #eee; }
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
img { max-width: 100%; height: auto; display: block; margin: 1rem 0; border: 1px solid #eee; }
.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: .8rem 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; white-space: nowrap; }
th { background: #f0f3f7; position: sticky; top: 0; cursor: pointer; user-select: none; }
th:hover { background: #e1e8f0; }
tbody tr:nth-child(even) { background: #fafafa; }
tbody tr:hover { background: #fff7d6; }
"""

# click a header to sort by that column (numbers by value: "1.2 MiB", "+3.4%", "0.061" all sort as numbers)
SCRIPT = """
document.querySelectorAll('table').forEach(function (table) {
  var heads = table.querySelectorAll('th');
  heads.forEach(function (th, col) {
    th.title = 'click to sort';
    th.addEventListener('click', function () {
      var body = table.tBodies[0], rows = Array.from(body.rows), up = th.dataset.dir !== 'up';
      heads.forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = up ? 'up' : 'down';
      var unit = {B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824};
      function key(row) {
        var t = row.cells[col] ? row.cells[col].textContent.trim() : '';
        var m = t.match(/^[+-]?[0-9.]+(e[+-]?[0-9]+)?/i);
        if (!m) return [1, t];
        var u = t.slice(m[0].length).trim().split(' ')[0];
        return [0, parseFloat(m[0]) * (unit[u] || 1)];
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0);
        return up ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _data_uri(folder: Path, name: str, figures: Collection[str]) -> str | None:
    """The figure ``name`` as a data URI, where it is one of ``figures`` and a PNG file in ``folder`` (never through a
    link).
    """
    if name not in figures or Path(name).name != name or name in ("", ".", ".."):
        return None
    try:
        data = untrusted.read_bytes(folder / name, untrusted.FIGURE)
    except untrusted.BadInput:
        return None
    if not data.startswith(PNG_MAGIC):
        return None
    return f"data:image/png;base64,{base64.b64encode(data).decode('ascii')}"


def render_html(markdown_text: str, folder: Path, title: str, figures: Collection[str] = ()) -> str:
    """The page: markdown rendered, the named figures inlined, links to anything but the page itself dropped."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown_text)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                src = str(child.attrGet("src") or "")
                uri = _data_uri(folder, src, figures)
                child.attrSet("src", uri or "")
                if uri is None:  # never fetched: the alt text stands in
                    child.attrSet("alt", f"{child.content} (missing: {src})")
            elif child.type == "link_open" and not str(child.attrGet("href") or "").startswith("#"):
                child.attrSet("href", "#")
    body = md.renderer.render(tokens, md.options, {})
    body = body.replace("<table>", '<div class="table"><table>').replace("</table>", "</table></div>")
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        f"style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
        f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def write_html(
    markdown_path: Path, markdown_text: str, figures: Collection[str], title: str = "netbench report"
) -> Path:
    """report.html beside ``markdown_path`` (report.md), from its text and the ``figures`` (file names) drawn for it."""
    out = markdown_path.with_suffix(".html")
    safe_files.write_text(out, render_html(markdown_text, markdown_path.parent, title, figures))
    return out
