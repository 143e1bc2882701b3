"""Text from a run directory or sweep folder, made safe for where a report puts it: markdown, HTML, the terminal.

Labels, reasons, descriptions and names come from files anyone may have written. In report.md a
``![e](/etc/hostname)`` would become an image (and report.html inlines images), a ``|`` would
split a table cell; on the terminal a ``[/]`` is rich markup (a MarkupError) and an ESC starts an
escape sequence. So every such text goes through one of these on its way out: control characters
(and the invisible ones that reorder text) dropped, one line, and the target's syntax escaped.
"""

from __future__ import annotations

import re
import unicodedata

from rich.markup import escape as escape_markup

__all__ = ["BIDI", "printable", "for_terminal", "for_markdown", "markdown_code"]

# bidirectional overrides and isolates: they make text read differently from what it holds
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# the characters that start inline syntax anywhere (emphasis, code, links and images, raw HTML, entities, table cells)
# ...
_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<>!|~&])")
# ... and those that start a block at the beginning of a line (heading, list, quote, setext underline)
_MARKDOWN_BLOCK = re.compile(r"^(\s*)([#+\-=>]|\d+[.)])")


def printable(text: object, limit: int = 2000) -> str:
    """``text`` on one line without control or reordering characters (newlines and tabs become spaces), at most
    ``limit`` characters.
    """
    out = []
    for ch in str(text):
        if ch in "\t\n\r":
            out.append(" ")
        elif unicodedata.category(ch) not in ("Cc", "Cs") and ch not in BIDI:
            out.append(ch)
    joined = "".join(out)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def for_terminal(text: object, limit: int = 2000) -> str:
    """:func:`printable`, with rich markup escaped: for ``console.print`` and rich tables."""
    return escape_markup(printable(text, limit))


def for_markdown(text: object, limit: int = 2000) -> str:
    """:func:`printable`, with every character that could start markdown syntax backslash-escaped: literal text in
    report.md and report.html.
    """
    inline = _MARKDOWN_INLINE.sub(r"\\\1", printable(text, limit))
    return _MARKDOWN_BLOCK.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], inline)


def markdown_code(text: object, limit: int = 200) -> str:
    """A code span of :func:`printable` text; backticks and pipes (which close the span or split a table cell) become
    quotes and slashes.
    """
    return "`" + printable(text, limit).replace("`", "'").replace("|", "/") + "`"
