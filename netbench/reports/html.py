"""A self-contained ``report.html`` beside report.md: the same text, figures inlined, nothing fetched.

The markdown report is rendered with markdown-it (already installed with rich), every local
image is replaced by a ``data:image/png;base64`` URI, styles are inline and a few lines of
inline script make tables sortable by clicking a header. The page names no http(s) URL, so it
opens the same offline, from a CI artifact or an e-mail attachment.
"""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path

from markdown_it import MarkdownIt

__all__ = ["render_html", "write_html"]

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #222; }
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


def _data_uri(path: Path) -> str | None:
    if not path.is_file():
        return None
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def render_html(markdown_text: str, folder: Path, title: str) -> str:
    """The page: markdown rendered, local images inlined, links to anything but the page itself dropped."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown_text)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                src = str(child.attrGet("src") or "")
                uri = _data_uri(folder / src) if src and "://" not in src else None
                child.attrSet("src", uri or "")
                if uri is None:  # never fetched: the alt text stands in
                    child.attrSet("alt", f"{child.content} (missing: {src})")
            elif child.type == "link_open" and not str(child.attrGet("href") or "").startswith("#"):
                child.attrSet("href", "#")
    body = md.renderer.render(tokens, md.options, {})
    body = body.replace("<table>", '<div class="table"><table>').replace("</table>", "</table></div>")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
            f'style-src \'unsafe-inline\'; script-src \'unsafe-inline\'">\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


def write_html(markdown_path: Path, title: str = "netbench report") -> Path:
    """report.html beside ``markdown_path`` (report.md), from its text and the figures it names."""
    out = markdown_path.with_suffix(".html")
    out.write_text(render_html(markdown_path.read_text(), markdown_path.parent, title))
    return out
