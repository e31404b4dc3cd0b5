"""Text written by the system under test, made safe to show.

A prediction, an error message from the database or an adapter's exception text can hold
terminal escape sequences (which repaint or hide what the terminal shows) and, in a CSV cell,
a leading ``=``, ``+``, ``-`` or ``@`` that a spreadsheet runs as a formula. Everything the
harness prints or writes for people goes through these two functions.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps \t and \n
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def printable(text: str) -> str:
    """``text`` with every control character except tab and newline shown as ``\\xNN``.

    >>> printable("SELECT 1\\x1b[2J -- gone")
    'SELECT 1\\\\x1b[2J -- gone'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def csv_cell(value: object) -> str:
    """A CSV cell: printable, and never read as a formula by a spreadsheet (a leading ``'``).

    >>> csv_cell("=HYPERLINK(1)"), csv_cell(3), csv_cell(None)
    ("'=HYPERLINK(1)", '3', '')
    """
    if value is None:
        return ""
    text = printable(str(value))
    return "'" + text if text.startswith(_FORMULA_START) else text
