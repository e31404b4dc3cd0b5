"""Text from elsewhere, made safe to show: the one place that escapes it for every output.

A prediction, an error message from the database, an adapter's exception text, a submission's
tool name or a results file's ``data_version`` can hold terminal escape sequences (which repaint
or hide what the terminal shows), bidirectional overrides (U+202E shows ``exe.txt`` as
``txt.exe``), NUL, HTML (``<script>``, ``<svg onload=...>``), Markdown links to
``javascript:`` and, in a CSV cell, a leading ``=``, ``+``, ``-`` or ``@`` that a spreadsheet
runs as a formula. Each writer calls the function for its medium:

- :func:`printable`: control, bidi and lone-surrogate characters shown as ``\\xNN`` /
  ``\\uNNNN`` (tab and newline kept); the base of every other function;
- :func:`one_line`: :func:`printable` with tab and newline escaped too (a terminal line, a
  table cell);
- :func:`html_text`: for HTML and SVG/XML text and attribute values;
- :func:`markdown_cell`: for a cell of a Markdown table (no HTML, no link, no emphasis);
- :func:`csv_cell`: for a CSV cell.
"""

from __future__ import annotations

import html
import re

# C0 and C1 controls except tab and newline, DEL, the bidi embeddings, overrides, isolates and
# marks, the line and paragraph separators, lone surrogates (not encodable as UTF-8) and the
# non-characters U+FFFE/U+FFFF (not allowed in XML)
_SHOWN_ESCAPED = (
    r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    r"\ud800-\udfff\ufffe\uffff"
)
_CONTROL = re.compile(f"[{_SHOWN_ESCAPED}]")
_CONTROL_OR_BREAK = re.compile(f"[{_SHOWN_ESCAPED}\t\n]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# the ASCII punctuation that makes links, images, code, emphasis, headings, math or a cell break
# inside a table cell (CommonMark lets any punctuation be backslash-escaped); parentheses stay
# (with [ and ] escaped they cannot make a link); & < > become entities, so no HTML and no
# autolink survives
_MARKDOWN = re.compile(r"([\\`*_{}\[\]#!|~:$])")


def _shown(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control, bidi and lone-surrogate character (tab and newline kept)
    shown as ``\\xNN`` or ``\\uNNNN``.

    >>> printable("SELECT 1\\x1b[2J -- gone"), printable("a\\u202eb")
    ('SELECT 1\\\\x1b[2J -- gone', 'a\\\\u202eb')
    """
    return _CONTROL.sub(lambda m: _shown(m.group()), text)


def one_line(text: str) -> str:
    """:func:`printable`, with tab and newline shown escaped too: text that must stay on one
    line (a terminal summary line, a table cell).

    >>> one_line("v1\\nheron: all green")
    'v1\\\\x0aheron: all green'
    """
    return _CONTROL_OR_BREAK.sub(lambda m: _shown(m.group()), text)


def html_text(value: object) -> str:
    """``value`` for HTML or SVG/XML text or a quoted attribute: :func:`printable`, then
    ``& < > " '`` as entities.

    >>> html_text('<svg onload="x">')
    '&lt;svg onload=&quot;x&quot;&gt;'
    """
    return html.escape(printable(str(value)), quote=True)


def markdown_cell(value: object) -> str:
    """``value`` for a cell of a Markdown table: on one line, every Markdown punctuation
    character backslash-escaped (no link, image, emphasis, code span or cell break) and
    ``& < >`` as entities (no HTML).

    >>> markdown_cell("[x](javascript:alert(1)) <b>")
    '\\\\[x\\\\](javascript\\\\:alert(1)) &lt;b&gt;'
    """
    text = _MARKDOWN.sub(r"\\\1", one_line(str(value)))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def csv_cell(value: object) -> str:
    """A CSV cell: printable, and never read as a formula by a spreadsheet (a leading ``'``).

    >>> csv_cell("=HYPERLINK(1)"), csv_cell(3), csv_cell(None)
    ("'=HYPERLINK(1)", '3', '')
    """
    if value is None:
        return ""
    text = printable(str(value))
    return "'" + text if text.startswith(_FORMULA_START) else text
